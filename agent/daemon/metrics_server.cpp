#include "gpuguard/daemon/metrics_server.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <httplib.h>

#include "gpuguard/common/logging.h"
#include "status_page.h"

namespace gpuguard::agent {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

std::string escape_label(const std::string& value) {
    std::string out;
    for (char c : value) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '"') {
            out += "\\\"";
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out;
}

std::string format_value(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    char text[64];
    if (value == std::floor(value) && std::fabs(value) < 1e15) {
        std::snprintf(text, sizeof text, "%.0f", value);  // integers plainly, not 1.98e+09
        return text;
    }
    const auto result = std::to_chars(text, text + sizeof text, value);  // shortest round-trip
    return std::string(text, result.ptr);
}

bool valid_name(const std::string& name) {
    static const std::regex pattern("[a-zA-Z_:][a-zA-Z0-9_:]*");
    return std::regex_match(name, pattern);
}

// Families in first-seen order, each with HELP, TYPE and its sample lines.
class Exposition {
  public:
    void add(const std::string& name, const std::string& help, const std::string& type,
             const Labels& labels, double value) {
        auto [it, inserted] = index_.try_emplace(name, families_.size());
        if (inserted) families_.push_back(Family{name, help, type, {}});
        Family& family = families_[it->second];
        std::string line = name;
        if (!labels.empty()) {
            line += "{";
            for (size_t i = 0; i < labels.size(); ++i) {
                line += (i ? "," : "") + labels[i].first + "=\"" + escape_label(labels[i].second) +
                        "\"";
            }
            line += "}";
        }
        family.lines.push_back(line + " " + format_value(value));
    }

    // value * multiply / divide, when present.
    template <typename T>
    void add(const std::string& name, const std::string& help, const std::string& type,
             const Labels& labels, const std::optional<T>& value, double multiply = 1.0,
             double divide = 1.0) {
        if (value) add(name, help, type, labels, double(*value) * multiply / divide);
    }

    bool has(const std::string& name) const { return index_.contains(name); }
    const std::string& type_of(const std::string& name) const {
        return families_[index_.at(name)].type;
    }

    std::string text() const {
        std::string out;
        for (const auto& family : families_) {
            out += "# HELP " + family.name + " " + family.help + "\n";
            out += "# TYPE " + family.name + " " + family.type + "\n";
            for (const auto& line : family.lines) out += line + "\n";
        }
        return out;
    }

  private:
    struct Family {
        std::string name, help, type;
        std::vector<std::string> lines;
    };
    std::vector<Family> families_;
    std::map<std::string, size_t> index_;
};

Labels with(Labels labels, std::string key, std::string value) {
    labels.emplace_back(std::move(key), std::move(value));
    return labels;
}

bool is_loopback(const std::string& address) {
    in_addr v4{};
    if (inet_pton(AF_INET, address.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
    in6_addr v6{};
    return inet_pton(AF_INET6, address.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace

std::string render_metrics(const backends::Snapshot& snapshot,
                           const std::vector<AgentMetric>& agent_metrics) {
    Exposition out;
    std::map<uint32_t, Labels> gpu_labels;
    for (const auto& device : snapshot.devices) {
        Labels labels = {{"gpu", std::to_string(device.index)},
                         {"uuid", device.uuid},
                         {"vendor", backends::to_string(device.vendor)},
                         {"model", device.model}};
        gpu_labels[device.index] = labels;
        // dcgm-exporter's MIG labels: GPU_I_ID, and the instance's own UUID.
        for (const auto& mig : device.mig_instances) {
            out.add("gpuguard_gpu_mig_instance_info",
                    "A MIG device of the GPU (GPU instance, compute instance); always 1.", "gauge",
                    with(with(with(labels, "GPU_I_ID", std::to_string(mig.gpu_instance)), "CI_ID",
                              std::to_string(mig.compute_instance)),
                         "mig_uuid", mig.uuid),
                    1.0);
        }
        out.add("gpuguard_gpu_info", "GPU identity; always 1.", "gauge",
                with(with(with(labels, "bus_id", device.bus_id), "driver", device.driver),
                     "driver_version", device.driver_version),
                1.0);
    }
    for (const auto& gpu : snapshot.gpus) {
        const Labels& l = gpu_labels[gpu.gpu];
        out.add("gpuguard_gpu_utilization_ratio", "GPU busy fraction (0-1).", "gauge", l,
                gpu.gpu_utilization_percent, 1.0, 100.0);
        out.add("gpuguard_gpu_memory_utilization_ratio", "Memory controller busy fraction (0-1).",
                "gauge", l, gpu.memory_utilization_percent, 1.0, 100.0);
        out.add("gpuguard_gpu_memory_used_bytes", "Device memory in use.", "gauge", l,
                gpu.memory_used_bytes);
        out.add("gpuguard_gpu_memory_free_bytes", "Device memory free.", "gauge", l,
                gpu.memory_free_bytes);
        out.add("gpuguard_gpu_memory_total_bytes", "Device memory size.", "gauge", l,
                gpu.memory_total_bytes);
        out.add("gpuguard_gpu_temperature_celsius", "Temperature by sensor.", "gauge",
                with(l, "sensor", "gpu"), gpu.temperature_gpu_celsius);
        out.add("gpuguard_gpu_temperature_celsius", "Temperature by sensor.", "gauge",
                with(l, "sensor", "memory"), gpu.temperature_memory_celsius);
        out.add("gpuguard_gpu_power_watts", "Power draw.", "gauge", l, gpu.power_draw_watts);
        out.add("gpuguard_gpu_power_limit_watts", "Enforced power limit.", "gauge", l,
                gpu.power_limit_watts);
        out.add("gpuguard_gpu_energy_joules_total", "Energy used since the driver loaded.",
                "counter", l, gpu.energy_joules);
        out.add("gpuguard_gpu_clock_hertz", "Clock frequency by domain.", "gauge",
                with(l, "clock", "sm"), gpu.sm_clock_mhz, 1e6);
        out.add("gpuguard_gpu_clock_hertz", "Clock frequency by domain.", "gauge",
                with(l, "clock", "memory"), gpu.memory_clock_mhz, 1e6);
        out.add("gpuguard_gpu_fan_speed_ratio", "Fan speed fraction (0-1).", "gauge", l,
                gpu.fan_speed_percent, 1.0, 100.0);
        out.add("gpuguard_gpu_performance_state", "NVIDIA P-state (0 = maximum performance).",
                "gauge", l, gpu.performance_state);
        out.add("gpuguard_gpu_pcie_throughput_bytes_per_second", "PCIe throughput by direction.",
                "gauge", with(l, "direction", "tx"), gpu.pcie_tx_bytes_per_second);
        out.add("gpuguard_gpu_pcie_throughput_bytes_per_second", "PCIe throughput by direction.",
                "gauge", with(l, "direction", "rx"), gpu.pcie_rx_bytes_per_second);
        out.add("gpuguard_gpu_encoder_utilization_ratio", "Video encoder busy fraction (0-1).",
                "gauge", l, gpu.encoder_utilization_percent, 1.0, 100.0);
        out.add("gpuguard_gpu_decoder_utilization_ratio", "Video decoder busy fraction (0-1).",
                "gauge", l, gpu.decoder_utilization_percent, 1.0, 100.0);
        out.add("gpuguard_gpu_ecc_errors_total", "Memory ECC errors since the driver loaded.",
                "counter", with(l, "type", "corrected"), gpu.ecc_errors_corrected);
        out.add("gpuguard_gpu_ecc_errors_total", "Memory ECC errors since the driver loaded.",
                "counter", with(l, "type", "uncorrected"), gpu.ecc_errors_uncorrected);
        if (gpu.throttle_reasons) {
            out.add("gpuguard_gpu_throttled", "1 when any clock throttle reason is active.",
                    "gauge", l, gpu.throttle_reasons->empty() ? 0.0 : 1.0);
            for (const auto& reason : *gpu.throttle_reasons) {
                out.add("gpuguard_gpu_throttle_reason", "Active clock throttle reasons (1 each).",
                        "gauge", with(l, "reason", reason), 1.0);
            }
        }
        out.add("gpuguard_gpu_last_xid", "Last NVIDIA Xid error seen since the agent started.",
                "gauge", l, gpu.last_xid);
        // NVML GPM under dcgm-exporter's names, fractions 0..1 like DCGM: the
        // GPU's, and on a GPU in MIG mode each GPU instance's (GPU_I_ID).
        const auto pipes = [&](const Labels& labels, const backends::GpmActivity& g) {
            const auto pipe = [&](const char* name, const char* help,
                                  const std::optional<double>& value) {
                out.add(name, help, "gauge", labels, value);
            };
            pipe("DCGM_FI_PROF_SM_ACTIVE", "Fraction of time an SM had a warp resident.",
                 g.sm_active);
            pipe("DCGM_FI_PROF_SM_OCCUPANCY", "Resident warps over the SMs' maximum.",
                 g.sm_occupancy);
            pipe("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Fraction of time any tensor pipe was busy.",
                 g.tensor_active);
            pipe("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "Fraction of time the FP64 pipe was busy.",
                 g.fp64_active);
            pipe("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "Fraction of time the FP32 pipe was busy.",
                 g.fp32_active);
            pipe("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "Fraction of time the FP16 pipe was busy.",
                 g.fp16_active);
            pipe("DCGM_FI_PROF_PIPE_INT_ACTIVE", "Fraction of time the integer pipe was busy.",
                 g.integer_active);
            pipe("DCGM_FI_PROF_DRAM_ACTIVE", "Fraction of peak DRAM bandwidth used.",
                 g.dram_active);
        };
        if (gpu.gpm) pipes(l, *gpu.gpm);
        for (const auto& [gpu_instance, activity] : gpu.gpm_by_gpu_instance) {
            pipes(with(l, "GPU_I_ID", std::to_string(gpu_instance)), activity);
        }
    }
    for (const auto& process : snapshot.processes) {
        const Labels l = with(gpu_labels[process.gpu], "pid", std::to_string(process.pid));
        out.add("gpuguard_process_gpu_memory_bytes", "Device memory a process holds.", "gauge", l,
                process.memory_bytes);
        out.add("gpuguard_process_gpu_utilization_ratio",
                "Busiest engine (or SM) fraction used by a process over the last interval.",
                "gauge", l, process.compute_percent, 1.0, 100.0);
        out.add("gpuguard_process_gpu_engine_busy_seconds_total",
                "GPU engine time a process used, all engines.", "counter", l,
                process.engine_busy_ns, 1.0, 1e9);
    }
    for (const auto& backend : snapshot.backends) {
        out.add("gpuguard_backend_up", "1 when the telemetry backend's last sample succeeded.",
                "gauge", {{"backend", backend.name}}, backend.ok ? 1.0 : 0.0);
    }
    for (const auto& metric : agent_metrics) {
        bool labels_ok = true;
        for (const auto& [key, value] : metric.labels)
            labels_ok &= valid_name(key) && key.rfind("__", 0) != 0;
        const bool type_ok = metric.type == "counter" || metric.type == "gauge";
        if (!valid_name(metric.name) || !labels_ok || !type_ok ||
            metric.name.rfind("gpuguard_gpu_", 0) == 0 ||
            (out.has(metric.name) && out.type_of(metric.name) != metric.type)) {
            logger("agent")->warn("metrics: dropping invalid agent metric '{}'", metric.name);
            continue;
        }
        out.add(metric.name, metric.help, metric.type, metric.labels, metric.value);
    }
    return out.text();
}

struct MetricsServer::Impl {
    httplib::Server server;
    std::thread thread;
    uint16_t port = 0;
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() {
    impl_->server.stop();
    if (impl_->thread.joinable()) impl_->thread.join();
}

uint16_t MetricsServer::port() const { return impl_->port; }

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const MetricsServerOptions& options,
                                                            SnapshotSource snapshot,
                                                            AgentMetricsSource agent) {
    if (!is_loopback(options.listen)) {
        return fail(ErrorCode::kInvalidArgument,
                    "metrics: '" + options.listen + "' is not a loopback address");
    }
    auto impl = std::make_unique<Impl>();
    httplib::Server& server = impl->server;
    // Bounded: two worker threads, small requests, short timeouts. It is a
    // loopback scrape endpoint, not a web server.
    server.new_task_queue = [] { return new httplib::ThreadPool(2); };
    server.set_payload_max_length(4096);
    server.set_read_timeout(5, 0);
    server.set_write_timeout(5, 0);
    server.set_keep_alive_max_count(100);
    // httplib's default sets SO_REUSEPORT, which would let another local
    // process bind the same port and take over the scrapes: only SO_REUSEADDR.
    server.set_socket_options([](int sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    server.Get("/metrics", [snapshot, agent](const httplib::Request&, httplib::Response& response) {
        const std::string body = render_metrics(snapshot ? snapshot() : backends::Snapshot{},
                                                agent ? agent() : std::vector<AgentMetric>{});
        response.set_content(body, "text/plain; version=0.0.4; charset=utf-8");
    });
    const bool status_page = static_cast<bool>(options.status_json);
    if (status_page) {
        auto page_headers = [](httplib::Response& response) {
            response.set_header("Content-Security-Policy", std::string(kStatusPageCsp));
            response.set_header("X-Content-Type-Options", "nosniff");
            response.set_header("Cache-Control", "no-store");
        };
        server.Get("/status", [page_headers](const httplib::Request&, httplib::Response& response) {
            page_headers(response);
            response.set_content(std::string(status_page_html()), "text/html; charset=utf-8");
        });
        server.Get("/status.js",
                   [page_headers](const httplib::Request&, httplib::Response& response) {
                       page_headers(response);
                       response.set_content(std::string(status_page_script()),
                                            "text/javascript; charset=utf-8");
                   });
        server.Get("/status.json", [page_headers, snapshot, status = options.status_json](
                                       const httplib::Request&, httplib::Response& response) {
            page_headers(response);
            const auto telemetry = snapshot ? snapshot() : backends::Snapshot{};
            response.set_content("{\"telemetry\":" + backends::to_json(telemetry, -1) +
                                     ",\"agent\":" + status() + "}",
                                 "application/json");
        });
    }
    server.Get("/", [status_page](const httplib::Request&, httplib::Response& response) {
        response.set_content(
            status_page ? "gpuguard: see /metrics and /status\n" : "gpuguard: see /metrics\n",
            "text/plain");
    });
    errno = 0;
    if (options.port == 0) {
        const int port = server.bind_to_any_port(options.listen);
        if (port <= 0) {
            return fail(ErrorCode::kIo,
                        "metrics: cannot listen on " + options.listen + ": " + std::strerror(errno),
                        errno);
        }
        impl->port = static_cast<uint16_t>(port);
    } else {
        if (!server.bind_to_port(options.listen, options.port)) {
            const int err = errno;
            return fail(ErrorCode::kIo,
                        "metrics: cannot listen on " + options.listen + ":" +
                            std::to_string(options.port) + ": " +
                            (err ? std::strerror(err) : "bind failed"),
                        err);
        }
        impl->port = options.port;
    }
    Impl* raw = impl.get();
    impl->thread = std::thread([raw] { raw->server.listen_after_bind(); });
    const std::string host =
        options.listen.find(':') != std::string::npos ? "[" + options.listen + "]" : options.listen;
    logger("agent")->info("metrics: serving /metrics on http://{}:{}/metrics", host, impl->port);
    if (status_page) {
        logger("agent")->info("metrics: serving the status page on http://{}:{}/status", host,
                              impl->port);
    }
    return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

}  // namespace gpuguard::agent
