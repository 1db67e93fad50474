#include "gpuguard/daemon/config_reload.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include <sys/inotify.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "gpuguard/common/inotify.h"

namespace gpuguard::agent {
namespace {

// (dotted key, value as YAML text) for every scalar or list of `node`, in
// document order. Maps recurse; anything else is one leaf.
void flatten(const YAML::Node& node, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>& leaves) {
    if (node.IsMap()) {
        for (const auto& entry : node) {
            const auto key = entry.first.as<std::string>();
            flatten(entry.second, prefix.empty() ? key : prefix + "." + key, leaves);
        }
        return;
    }
    YAML::Emitter text;
    text << YAML::Flow << node;
    leaves.emplace_back(prefix, text.c_str());
}

std::vector<std::pair<std::string, std::string>> leaves_of(const Config& config) {
    std::vector<std::pair<std::string, std::string>> leaves;
    flatten(YAML::Load(config_to_yaml(config)), "", leaves);
    return leaves;
}

}  // namespace

bool config_key_applies_live(const std::string& key) {
    // The log level is a property of the loggers; everything else was handed
    // to a kernel map size, a thread or an open file at start. Rule files
    // themselves are reloaded by their own watcher (docs/rules.md).
    return key == "log.level";
}

std::vector<ConfigChange> diff_config(const Config& running, const Config& next) {
    // config_to_yaml emits a fixed set of keys in a fixed order, so the two
    // leaf lists line up; a key present on one side only still counts.
    const auto before = leaves_of(running);
    const auto after = leaves_of(next);
    std::vector<ConfigChange> changes;
    for (const auto& [key, new_value] : after) {
        std::string old_value;
        for (const auto& [old_key, value] : before) {
            if (old_key == key) old_value = value;
        }
        if (old_value != new_value) {
            changes.push_back(
                ConfigChange{key, old_value, new_value, config_key_applies_live(key)});
        }
    }
    // Sink tokens and credential headers are redacted in the YAML, so a new
    // secret alone is found here.
    const bool outputs_changed = std::any_of(changes.begin(), changes.end(),
                                             [](const auto& c) { return c.key == "outputs"; });
    if (!outputs_changed && running.outputs.size() == next.outputs.size()) {
        for (size_t i = 0; i < next.outputs.size(); ++i) {
            if (running.outputs[i].token != next.outputs[i].token) {
                changes.push_back(ConfigChange{"outputs", "token of " + running.outputs[i].name,
                                               "a new token", config_key_applies_live("outputs")});
                break;
            }
            if (running.outputs[i].http_headers != next.outputs[i].http_headers) {
                changes.push_back(ConfigChange{
                    "outputs", "http_headers of " + running.outputs[i].name,
                    "new (redacted) http_headers", config_key_applies_live("outputs")});
                break;
            }
        }
    }
    return changes;
}

ConfigFileWatch::ConfigFileWatch(UniqueFd inotify_fd, std::string file_name)
    : inotify_fd_(std::move(inotify_fd)), file_name_(std::move(file_name)) {}

Result<ConfigFileWatch> ConfigFileWatch::start(const std::filesystem::path& file) {
    const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        return fail(ErrorCode::kIo,
                    std::string("config watch: inotify_init1: ") + std::strerror(err), err);
    }
    ConfigFileWatch watch(UniqueFd(fd), file.filename().string());
    auto directory = file.parent_path();
    if (directory.empty()) directory = ".";
    // The directory, not the file: a rename over the file replaces its inode.
    if (inotify_add_watch(fd, directory.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
        const int err = errno;
        return fail(ErrorCode::kIo,
                    "config watch: cannot watch " + directory.string() + ": " + std::strerror(err),
                    err);
    }
    return watch;
}

bool ConfigFileWatch::changed() {
    return drain_inotify(inotify_fd_.get(), [&](const inotify_event& event) {
        return event.len > 0 && (file_name_ == event.name || is_configmap_swap(event.name));
    });
}

}  // namespace gpuguard::agent
