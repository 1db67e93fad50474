// bpffs pins that keep in-kernel enforcement in force while no agent runs
// (docs/enforcement.md#when-the-agent-dies): kill_now's known-bad maps and
// the programs that read them, the cgroup/dev and connect deny programs and
// their maps. A restarted agent reuses the maps, takes the cgroup links over
// (their program swapped in place) and replaces the tracepoint links (the
// new one attached before the old one goes): nothing is attached twice and
// there is no moment without enforcement.
//
// Layout under the pin directory: maps/<map name>, links/sensor-<program>,
// links/lsm, links/dev@<cgroup>, links/connect4@<cgroup>, links/connect6@<cgroup>
// (the cgroup path with '%', '/' and '.' percent-escaped: bpffs reserves
// names with dots).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpuguard/common/result.h"

struct bpf_map;
struct bpf_link;

namespace gpuguard::agent {

// A pin found missing by PinDirectory::restore_missing.
struct MissingPin {
    std::string file;
    bool restored = false;  // pinned again from the object the agent holds
    std::string error;      // why not, when not
};

// What start-up found and did with earlier pins; shown in `gpuguard status`.
struct PinReport {
    std::string path;
    uint32_t maps_reused = 0;   // maps whose contents outlived the last agent
    uint32_t maps_dropped = 0;  // pinned maps that no longer matched (an upgrade) and were unpinned
    uint32_t links_adopted = 0;   // cgroup links taken over, program swapped in place
    uint32_t links_replaced = 0;  // tracepoint/LSM links replaced by this agent's
};

class PinDirectory {
  public:
    // Claims `path` for this agent: created (0700) when missing, under a
    // mounted bpf filesystem; an flock on it keeps a second agent out.
    // kUnsupported when the parent is not bpffs, kInvalidArgument when
    // another live agent holds it, kIo/kPermission otherwise.
    static Result<std::shared_ptr<PinDirectory>> claim(const std::string& path);
    ~PinDirectory();  // releases the claim; the pins stay
    PinDirectory(const PinDirectory&) = delete;
    PinDirectory& operator=(const PinDirectory&) = delete;

    const std::string& path() const { return path_; }

    // Before the object loads: `map` is pinned as maps/<name> and, when a
    // compatible map is pinned there already, reused (libbpf's pin path).
    // An incompatible one (type, key, value or size changed) is unpinned
    // with a warning and the map starts empty.
    void pin_map_on_load(bpf_map* map);
    // After the object loaded: `map` (given to pin_map_on_load) is pinned;
    // restore_missing() watches its pin from now on.
    void note_pinned_map(const bpf_map* map);

    // The link pinned as links/<name> by an earlier agent; null when none.
    // The returned link keeps its pin path, so unpin() removes the file.
    bpf_link* open_link(const std::string& name);
    // Pins `link` as links/<name>, replacing whatever is pinned there.
    Status pin_link(bpf_link* link, const std::string& name);
    // Removes links/<name> (nothing when absent).
    void unpin_link(const std::string& name);
    // Names of pinned links starting with `prefix`.
    std::vector<std::string> link_names(const std::string& prefix) const;

    // Every pin removed, the directory too: what this agent holds is then
    // detached when it closes it. For a clean exit without keep_pinned_on_exit.
    void remove_all();

    // The pins this agent made or took over that are gone from the
    // directory (removed by another process: `rm`, `bpftool`), each pinned
    // again from the link or map the agent still holds. Cheap: one access(2)
    // per pin.
    std::vector<MissingPin> restore_missing();

    PinReport& report() { return report_; }
    const PinReport& report() const { return report_; }

  private:
    PinDirectory(std::string path, int lock_fd);
    std::string link_file(const std::string& name) const;

    std::string path_;
    int lock_fd_ = -1;
    PinReport report_;
    struct Pinned {
        bool link = false;  // else a map
        uint32_t id = 0;    // the kernel's link or map id
    };
    std::map<std::string, Pinned> pinned_;  // by pin file
};

// "/a/b%c.d" -> "%2Fa%2Fb%25c%2Ed": a cgroup path as one bpffs file name.
std::string escape_pin_name(const std::string& text);
std::string unescape_pin_name(const std::string& name);

}  // namespace gpuguard::agent
