// Container names from the runtimes' own state on the host, for guard
// policies scoped by container name: docker's
// var/lib/docker/containers/ID/config.v2.json ("Name") and podman's (and
// CRI-O's) var/lib/containers/storage/overlay-containers/containers.json
// ("names"). containerd under Kubernetes keeps no name there: "" then.
#pragma once

#include <filesystem>
#include <map>
#include <string>

namespace gpuguard::agent {

class ContainerNames {
  public:
    // `root`: where the runtimes' state lives ("/" on a host, a fixture in tests).
    explicit ContainerNames(std::filesystem::path root = "/") : root_(std::move(root)) {}

    // The container's name ("" when the runtime's state has none or cannot
    // be read). Remembered per id: a container keeps its name for life.
    const std::string& name_of(const std::string& runtime, const std::string& id);

  private:
    std::string lookup(const std::string& runtime, const std::string& id) const;

    std::filesystem::path root_;
    std::map<std::string, std::string> names_;  // id -> name, bounded
};

}  // namespace gpuguard::agent
