#include "tests/support/fake_nvml_script.h"

#include <nlohmann/json.hpp>

namespace gpuguard::testing {
namespace {

constexpr uint64_t kTotal = 80ull << 30;

nlohmann::json step(const FakeH100& gpu) {
    nlohmann::json processes = nlohmann::json::array();
    nlohmann::json utilization = nlohmann::json::array();
    for (const auto& process : gpu.processes) {
        processes.push_back({{"pid", process.pid}, {"used_memory", process.used_memory}});
        if (process.sm_percent > 0) {
            utilization.push_back(
                {{"pid", process.pid}, {"sm", process.sm_percent}, {"timestamp_now", true}});
        }
    }
    nlohmann::json played{{"utilization", {gpu.gpu_utilization, gpu.memory_utilization}},
                          {"memory", {kTotal, gpu.memory_used, kTotal - gpu.memory_used}},
                          {"compute_processes", processes}};
    if (!utilization.empty()) played["process_utilization"] = utilization;
    if (!gpu.gpm.empty()) {
        auto& gpm = played["gpm"] = nlohmann::json::object();
        for (const auto& [metric, percent] : gpu.gpm) gpm[metric] = percent;
    }
    return played;
}

nlohmann::json script(const std::vector<FakeH100>& steps) {
    nlohmann::json played = nlohmann::json::array();
    for (const auto& gpu : steps) played.push_back(step(gpu));
    return nlohmann::json{{"driver_version", "550.54.15"},
                          {"devices",
                           {{{"name", "NVIDIA H100 80GB HBM3"},
                             {"uuid", "GPU-00000000-1111-2222-3333-444444444444"},
                             {"bus_id", "00000000:3B:00.0"},
                             {"minor", 0},
                             {"steps", played}}}}};
}

}  // namespace

std::string fake_nvml_script(const FakeH100& gpu) { return script({gpu}).dump(); }

std::string fake_nvml_script(const std::vector<FakeH100>& steps, const std::string& step_file,
                             const std::vector<std::vector<unsigned>>& xids) {
    auto text = script(steps);
    text["step_file"] = step_file;
    auto& played = text["devices"][0]["steps"];
    for (size_t i = 0; i < xids.size() && i < played.size(); ++i) {
        if (!xids[i].empty()) played[i]["xid"] = xids[i];
    }
    return text.dump();
}

}  // namespace gpuguard::testing
