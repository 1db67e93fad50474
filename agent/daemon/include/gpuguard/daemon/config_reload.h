// Reloading the configuration file of a running agent (SIGHUP, or the file
// changing on disk): which keys changed, which of them the running agent
// can apply, and which only take effect after a restart.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "gpuguard/common/result.h"
#include "gpuguard/common/unique_fd.h"
#include "gpuguard/daemon/config.h"

namespace gpuguard::agent {

// One changed key, as a dotted path of `gpuguard config show` ("log.level",
// "sensor.ring_buffer_kb", "outputs" for any change to the list of sinks),
// with the old and new values as that command prints them.
struct ConfigChange {
    std::string key;
    std::string old_value;
    std::string new_value;
    bool applies_live = false;  // false: "requires restart"
};

// Keys whose change a running agent applies without a restart.
bool config_key_applies_live(const std::string& key);

// Every leaf that differs between `running` and `next`, in `config show`
// order. Lists compare as a whole (one change for "sensor.watched_ports").
std::vector<ConfigChange> diff_config(const Config& running, const Config& next);

// Watches one configuration file with inotify for writes and replacements
// (editors that write a new file and rename it over the old one included).
// Owns its inotify descriptor.
class ConfigFileWatch {
  public:
    // Watches the file's directory. Fails with kIo when inotify is unusable.
    static Result<ConfigFileWatch> start(const std::filesystem::path& file);

    // True when the file was written or replaced since the last call; never blocks.
    bool changed();

  private:
    ConfigFileWatch(UniqueFd inotify_fd, std::string file_name);
    UniqueFd inotify_fd_;
    std::string file_name_;
};

}  // namespace gpuguard::agent
