// The `when:` conditions of a correlation rule that judge readings over a
// window (memory_growth, sustained_utilization, sustained_cpu,
// unexplained_gpu_load, quiet_io, gpu_pipe_mix) read from YAML: their thresholds,
// statistic and window (RuleReader, rules/correlation_reader.h); every
// problem reported as "file:line:col: message".
#include <cmath>
#include <cstdio>
#include <iterator>

#include "gpuguard/rules/correlation.h"
#include "rules/correlation_reader.h"

namespace gpuguard::rules {

MemoryGrowthCondition RuleReader::read_memory_growth(const YAML::Node& node,
                                                     const std::string& where) {
    MemoryGrowthCondition condition;
    if (diag_.check_keys(node, where, {"bytes", "within", "max_utilization_percent"})) {
        size(node, "bytes", where, condition.bytes);
        if (node["within"]) {
            if (auto value = duration(node["within"], where + ".within")) {
                condition.within = *value;
            }
        }
        if (node["max_utilization_percent"]) {
            if (auto value = number(node["max_utilization_percent"],
                                    where + ".max_utilization_percent", 0, 100)) {
                condition.max_utilization_percent = *value;
            }
        }
    }
    return condition;
}

SustainedUtilizationCondition RuleReader::read_sustained_utilization(const YAML::Node& node,
                                                                     const std::string& where) {
    SustainedUtilizationCondition condition;
    if (diag_.check_keys(
            node, where,
            {"above_percent", "by", "for", "max_connects", "min_connects", "min_power_percent"})) {
        if (node["min_power_percent"]) {
            condition.min_power_percent =
                number(node["min_power_percent"], where + ".min_power_percent", 0, 100);
        }
        if (node["above_percent"]) {
            if (auto value = number(node["above_percent"], where + ".above_percent", 0, 100)) {
                condition.above_percent = *value;
            }
        }
        if (node["by"])
            read_statistic(node["by"], where + ".by", condition.by, condition.percentile);
        if (node["for"]) {
            if (auto value = duration(node["for"], where + ".for")) {
                condition.duration = *value;
            }
        }
        if (node["max_connects"]) {
            if (auto value = number(node["max_connects"], where + ".max_connects", 0, 1e6)) {
                condition.max_connects = static_cast<uint32_t>(*value);
            }
        }
        if (node["min_connects"]) {
            if (auto value = number(node["min_connects"], where + ".min_connects", 0, 1e6)) {
                condition.min_connects = static_cast<uint32_t>(*value);
            }
        }
    }
    return condition;
}

void RuleReader::read_statistic(const YAML::Node& node, const std::string& where,
                                UtilizationStatistic& by, int& percentile) {
    const auto text = diag_.scalar(node, where);
    int number = 0;
    char extra = 0;
    if (text && *text == "every") {
        by = UtilizationStatistic::kEvery;
    } else if (text && *text == "mean") {
        by = UtilizationStatistic::kMean;
    } else if (text && std::sscanf(text->c_str(), "p%d%c", &number, &extra) == 1 && number >= 1 &&
               number <= 99 && *text == "p" + std::to_string(number)) {
        by = UtilizationStatistic::kPercentile;
        percentile = number;
    } else if (text) {
        diag_.error(node, where +
                              ": must be every, mean or a percentile p1..p99 "
                              "(p10: nine readings in ten above), got '" +
                              *text + "'");
    }
}

SustainedCpuCondition RuleReader::read_sustained_cpu(const YAML::Node& node,
                                                     const std::string& where) {
    SustainedCpuCondition condition;
    if (!diag_.check_keys(node, where, {"above_cores", "by", "for", "max_connects"})) {
        return condition;
    }
    if (!node["above_cores"])
        diag_.error(node, where + ": needs above_cores (cores' worth, e.g. 1.5)");
    if (node["above_cores"]) {
        if (auto value = number(node["above_cores"], where + ".above_cores", 0, 4096)) {
            condition.above_cores = *value;
        }
    }
    if (node["by"]) read_statistic(node["by"], where + ".by", condition.by, condition.percentile);
    if (node["for"]) {
        if (auto value = duration(node["for"], where + ".for")) condition.duration = *value;
    }
    if (node["max_connects"]) {
        if (auto value = number(node["max_connects"], where + ".max_connects", 0, 1e6)) {
            condition.max_connects = static_cast<uint32_t>(*value);
        }
    }
    return condition;
}

UnexplainedGpuLoadCondition RuleReader::read_unexplained_gpu_load(const YAML::Node& node,
                                                                  const std::string& where) {
    UnexplainedGpuLoadCondition condition;
    if (!diag_.check_keys(node, where, {"above_percent", "by", "for", "max_explained_percent"})) {
        return condition;
    }
    if (node["above_percent"]) {
        if (auto value = number(node["above_percent"], where + ".above_percent", 0, 100)) {
            condition.above_percent = *value;
        }
    }
    if (node["by"]) read_statistic(node["by"], where + ".by", condition.by, condition.percentile);
    if (node["for"]) {
        if (auto value = duration(node["for"], where + ".for")) condition.duration = *value;
    }
    if (node["max_explained_percent"]) {
        if (auto value =
                number(node["max_explained_percent"], where + ".max_explained_percent", 0, 100)) {
            condition.max_explained_percent = *value;
        }
    }
    return condition;
}

QuietIoCondition RuleReader::read_quiet_io(const YAML::Node& node, const std::string& where) {
    QuietIoCondition condition;
    if (diag_.check_keys(node, where,
                         {"for", "max_file_write_bytes", "max_net_send_bytes", "max_bytes_per_send",
                          "max_send_gap", "max_sends", "max_net_recv_bytes"})) {
        if (node["for"]) {
            if (auto value = duration(node["for"], where + ".for")) {
                condition.duration = *value;
            }
        }
        size(node, "max_file_write_bytes", where, condition.max_file_write_bytes);
        size(node, "max_net_send_bytes", where, condition.max_net_send_bytes);
        size(node, "max_bytes_per_send", where, condition.max_bytes_per_send);
        if (node["max_send_gap"]) {
            if (auto value = duration(node["max_send_gap"], where + ".max_send_gap")) {
                condition.max_send_gap = *value;
            }
        }
        if (node["max_sends"]) {
            if (auto value = number(node["max_sends"], where + ".max_sends", 1, 1e9)) {
                condition.max_sends = static_cast<uint64_t>(*value);
            }
        }
        if (node["max_net_recv_bytes"]) {
            uint64_t bytes = 0;
            size(node, "max_net_recv_bytes", where, bytes);
            condition.max_net_recv_bytes = bytes;
        }
    }
    return condition;
}

GpuPipeMixCondition RuleReader::read_gpu_pipe_mix(const YAML::Node& node,
                                                  const std::string& where) {
    GpuPipeMixCondition condition;
    static constexpr const char* kBounds[] = {"integer_or_dram_above_percent",
                                              "tensor_below_percent", "fp_below_percent",
                                              "tensor_above_percent"};
    if (!diag_.check_keys(node, where, {"for", kBounds[0], kBounds[1], kBounds[2], kBounds[3]})) {
        return condition;
    }
    if (!node["for"])
        diag_.error(node, where + ": needs for: (the window the pipes are judged over)");
    if (node["for"]) {
        if (auto value = duration(node["for"], where + ".for")) condition.duration = *value;
    }
    std::optional<double>* const into[] = {
        &condition.integer_or_dram_above_percent, &condition.tensor_below_percent,
        &condition.fp_below_percent, &condition.tensor_above_percent};
    bool any = false;
    for (size_t i = 0; i < std::size(kBounds); ++i) {
        if (!node[kBounds[i]]) continue;
        any = true;
        *into[i] = number(node[kBounds[i]], where + "." + kBounds[i], 0, 100);
    }
    if (!any) {
        diag_.error(node, where +
                              ": set at least one bound (integer_or_dram_above_percent, "
                              "tensor_below_percent, fp_below_percent, tensor_above_percent)");
    }
    return condition;
}

}  // namespace gpuguard::rules
