// Container identity from the runtimes' own state on the host: name, image
// and Kubernetes pod of a container whose id the cgroup path gave
// (gpuguard/state/proc_parse.h). Sources, all read-only:
//   podman      var/lib/containers/storage/libpod/bolt_state.db (or db.sql):
//               the container's JSON config record (name, rootfsImageName,
//               rootfsImageID, labels); overlay-containers/containers.json
//               as the fallback for the name and image
//   docker      var/lib/docker/containers/ID/config.v2.json (Name,
//               Config.Image, Image, Config.Labels)
//   containerd  run/containerd/io.containerd.runtime.v2.task/NS/ID/config.json
//               annotations (io.kubernetes.cri.*, nerdctl/name)
//   cri-o       var/lib/containers/storage/overlay-containers/ID/userdata/
//               config.json annotations (io.kubernetes.*), containers.json
// Labels and annotations io.kubernetes.pod.name/.namespace/.uid and
// io.kubernetes.container.name name the pod.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <string>

#include "gpuguard/common/detection.h"
#include "gpuguard/events/event.h"
#include "gpuguard/state/proc_parse.h"

namespace gpuguard::agent {

class ContainerNames {
  public:
    // `root`: where the runtimes' state lives ("/" on a host, a fixture in
    // tests). `read_host` false (replay): only remember()ed containers are known.
    explicit ContainerNames(std::filesystem::path root = "/", bool read_host = true)
        : root_(std::move(root)), read_host_(read_host) {}

    // What the runtime's state says about `container` (all "" when it says
    // nothing or cannot be read: never fails). Cached per id; the runtime's
    // file is read again when its modification time changes (a container
    // that was removed, or one created under a reused name), and a container
    // not found yet is looked up again at the next call.
    const ContainerDetails& details_of(const ContainerInfo& container);

    // Takes a journaled container event's details as the truth for its id
    // (replay; live, the same details it read).
    void remember(const Container& container);

    size_t size() const { return cache_.size(); }

  private:
    struct Entry {
        ContainerDetails details;
        std::filesystem::file_time_type source_mtime{};  // of the file read, {} if none
        std::filesystem::path source;                    // "" when remembered
    };
    Entry lookup(const ContainerInfo& container) const;
    Entry& insert(const std::string& id, Entry entry);

    std::filesystem::path root_;
    bool read_host_;
    std::map<std::string, Entry> cache_;  // id -> details, bounded
    std::deque<std::string> order_;       // ids, oldest first
};

}  // namespace gpuguard::agent
