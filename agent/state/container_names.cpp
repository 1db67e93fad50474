// ContainerNames (agent/container_names.h): reads a runtime's state file once
// per container id; any parse problem means "no name".
#include "gpuguard/state/container_names.h"

#include <fstream>

#include <nlohmann/json.hpp>

namespace gpuguard::agent {
namespace {

constexpr size_t kMaxRemembered = 4096;

std::optional<nlohmann::json> read_json(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    try {
        return nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

}  // namespace

const std::string& ContainerNames::name_of(const std::string& runtime, const std::string& id) {
    if (const auto found = names_.find(id); found != names_.end()) return found->second;
    if (names_.size() >= kMaxRemembered) names_.clear();
    return names_.emplace(id, lookup(runtime, id)).first->second;
}

std::string ContainerNames::lookup(const std::string& runtime, const std::string& id) const {
    try {
        if (runtime == "docker") {
            const auto config =
                read_json(root_ / "var/lib/docker/containers" / id / "config.v2.json");
            if (!config || !config->contains("Name") || !(*config)["Name"].is_string()) return "";
            std::string name = (*config)["Name"].get<std::string>();
            if (name.starts_with('/')) name.erase(0, 1);
            return name;
        }
        if (runtime == "podman" || runtime == "cri-o") {
            const auto list = read_json(root_ / "var/lib/containers/storage/overlay-containers" /
                                        "containers.json");
            if (!list || !list->is_array()) return "";
            for (const auto& entry : *list) {
                if (entry.value("id", "") != id) continue;
                const auto names = entry.find("names");
                if (names == entry.end() || !names->is_array() || names->empty() ||
                    !names->front().is_string()) {
                    return "";
                }
                return names->front().get<std::string>();
            }
        }
    } catch (const nlohmann::json::exception&) {
    }
    return "";
}

}  // namespace gpuguard::agent
