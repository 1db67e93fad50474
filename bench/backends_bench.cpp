// Cost of one full GPU telemetry sample on a host with 8 GPUs and 500 GPU
// processes among 5 000, three ways, measured in the same run:
//
//   targeted   gpuguard's way: sysfs for the 8 GPUs + fdinfo of exactly the
//              500 (pid, fd) pairs the sensor reported
//   sweep      nvtop's way: stat every /proc/<pid>/fd/* of all 5 000
//              processes each sample to find the GPU fds, then the same reads
//   cli        GPU Kill's way: spawn a monitoring CLI per sample (a small
//              shell script reading the same sysfs files stands in for
//              rocm-smi, so this is a lower bound for the real tool)
//
// Everything runs against a fixture tree in a temp dir (no GPU needed).
// Usage: backends_bench [--processes=N] [--gpu-processes=N] [benchmark flags]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuguard/backends/backends.h"
#include "gpuguard/common/logging.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using gpuguard::backends::DeviceNumber;
using gpuguard::backends::ProcessFd;

constexpr int kGpus = 8;
constexpr int kFdsPerProcess = 12;

void write_file(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
}

std::string slot(int gpu) {
    char text[32];
    std::snprintf(text, sizeof text, "0000:%02x:00.0", 0x10 + gpu);
    return text;
}

// An amdgpu host (amdgpu_pm.c formats) with `processes` processes, the first
// `gpu_processes` of which hold one DRM fd (fdinfo per amdgpu_fdinfo.c).
std::vector<ProcessFd> build_fixture(const fs::path& root, int processes, int gpu_processes,
                                     std::vector<std::string>& cli_files) {
    for (int gpu = 0; gpu < kGpus; ++gpu) {
        const fs::path dev = root / "sys/devices/pci0000:00" / slot(gpu);
        write_file(dev / "uevent",
                   "DRIVER=amdgpu\nPCI_ID=1002:740F\nPCI_SLOT_NAME=" + slot(gpu) + "\n");
        write_file(dev / ("drm/card" + std::to_string(gpu)) / "dev",
                   "226:" + std::to_string(gpu) + "\n");
        write_file(dev / ("drm/renderD" + std::to_string(128 + gpu)) / "dev",
                   "226:" + std::to_string(128 + gpu) + "\n");
        fs::create_directory_symlink(dev, dev / ("drm/card" + std::to_string(gpu)) / "device");
        fs::create_directories(root / "sys/class/drm");
        fs::create_directory_symlink(dev / ("drm/card" + std::to_string(gpu)),
                                     root / "sys/class/drm" / ("card" + std::to_string(gpu)));
        const std::map<std::string, std::string> files = {
            {"gpu_busy_percent", "97\n"},
            {"mem_busy_percent", "40\n"},
            {"mem_info_vram_total", "68702699520\n"},
            {"mem_info_vram_used", "8589934592\n"},
            {"hwmon/hwmon1/temp1_label", "edge\n"},
            {"hwmon/hwmon1/temp1_input", "61000\n"},
            {"hwmon/hwmon1/temp3_label", "mem\n"},
            {"hwmon/hwmon1/temp3_input", "70000\n"},
            {"hwmon/hwmon1/power1_average", "500000000\n"},
            {"hwmon/hwmon1/power1_cap", "550000000\n"},
            {"hwmon/hwmon1/freq1_label", "sclk\n"},
            {"hwmon/hwmon1/freq1_input", "2100000000\n"},
            {"hwmon/hwmon1/freq2_label", "mclk\n"},
            {"hwmon/hwmon1/freq2_input", "1300000000\n"},
            {"ras/umc_err_count", "ue: 0\nce: 0\n"}};
        for (const auto& [name, text] : files) {
            write_file(dev / name, text);
            cli_files.push_back((dev / name).string());
        }
    }
    write_file(root / "proc/sys/kernel/osrelease", "6.12.0\n");
    std::vector<ProcessFd> gpu_fds;
    for (int pid = 1000; pid < 1000 + processes; ++pid) {
        const fs::path proc = root / "proc" / std::to_string(pid);
        fs::create_directories(proc / "fd");
        fs::create_directories(proc / "fdinfo");
        for (int fd = 0; fd < kFdsPerProcess; ++fd) {
            const bool gpu_fd = pid - 1000 < gpu_processes && fd == 5;
            // GPU fds point at a character device registered as the GPU (1:3);
            // the rest at a regular file, like most fds of a real process.
            fs::create_symlink(gpu_fd ? "/dev/null" : "/etc/hostname",
                               proc / "fd" / std::to_string(fd));
            if (gpu_fd) {
                const int gpu = (pid - 1000) % kGpus;
                write_file(proc / "fdinfo" / std::to_string(fd),
                           "pos:\t0\nflags:\t02100002\nmnt_id:\t25\nino:\t1187\n"
                           "drm-driver:\tamdgpu\ndrm-client-id:\t" +
                               std::to_string(pid) + "\ndrm-pdev:\t" + slot(gpu) +
                               "\npasid:\t32774\ndrm-total-vram:\t1048576 KiB\n"
                               "drm-resident-vram:\t1048576 KiB\ndrm-memory-vram:\t1048576 KiB\n"
                               "drm-memory-gtt: \t8192 KiB\ndrm-memory-cpu: \t0 KiB\n"
                               "drm-engine-gfx:\t123456789 ns\ndrm-engine-compute:\t0 ns\n");
                gpu_fds.push_back(ProcessFd{pid, fd, {226, static_cast<uint32_t>(128 + gpu)}});
            }
        }
    }
    return gpu_fds;
}

class CollectingReporter : public benchmark::ConsoleReporter {
  public:
    void ReportRuns(const std::vector<Run>& runs) override {
        for (const auto& run : runs) {
            if (run.error_occurred) failed = true;
            if (run.run_type == Run::RT_Iteration)
                times_ns[run.benchmark_name()] = run.GetAdjustedRealTime();
        }
        ConsoleReporter::ReportRuns(runs);
    }
    std::map<std::string, double> times_ns;
    bool failed = false;
};

}  // namespace

int main(int argc, char** argv) {
    int processes = 5000;
    int gpu_processes = 500;
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strncmp(argv[i], "--processes=", 12) == 0) {
            processes = std::max(1, std::atoi(argv[i] + 12));
        } else if (std::strncmp(argv[i], "--gpu-processes=", 16) == 0) {
            gpu_processes = std::max(1, std::atoi(argv[i] + 16));
        } else {
            args.push_back(argv[i]);
        }
    }
    gpu_processes = std::min(gpu_processes, processes);
    int bench_argc = static_cast<int>(args.size());
    benchmark::Initialize(&bench_argc, args.data());
    gpuguard::set_log_level("warn");

    char dir_template[] = "/tmp/gg-backends-bench-XXXXXX";
    if (!mkdtemp(dir_template)) return 1;
    const fs::path root = dir_template;
    std::vector<std::string> cli_files;
    const auto gpu_fds = build_fixture(root, processes, gpu_processes, cli_files);
    std::string script = "#!/bin/sh\n# stand-in for rocm-smi: read every GPU's sysfs metrics\ncat";
    for (const auto& file : cli_files) script += " '" + file + "'";
    script += " > /dev/null\nls " + (root / "proc").string() + " > /dev/null\n";
    write_file(root / "fake-rocm-smi", script);
    fs::permissions(root / "fake-rocm-smi", fs::perms::owner_all);

    gpuguard::backends::DrmOptions options;
    options.sysfs_root = root / "sys";
    options.proc_root = root / "proc";
    auto drm = gpuguard::backends::make_drm_backend(options);
    auto devices = drm->devices();
    if (!devices || devices->size() != kGpus) {
        std::fprintf(stderr, "backends_bench: fixture has %zu GPUs\n",
                     devices ? devices->size() : 0);
        return 1;
    }
    const std::vector<DeviceNumber> gpu_numbers = {{1, 3}};
    bool wrong = false;

    benchmark::RegisterBenchmark("BM_BackendsSample_targeted", [&](benchmark::State& state) {
        for (auto _ : state) {
            auto gpus = drm->sample_gpus();
            auto procs = drm->sample_processes(gpu_fds);
            if (!gpus || !procs || procs->processes.size() != size_t(gpu_processes)) wrong = true;
            benchmark::DoNotOptimize(procs);
        }
    });
    benchmark::RegisterBenchmark("BM_BackendsSample_sweep", [&](benchmark::State& state) {
        for (auto _ : state) {
            const auto found = gpuguard::backends::sweep_gpu_fds(options.proc_root, gpu_numbers);
            auto gpus = drm->sample_gpus();
            auto procs = drm->sample_processes(found);
            if (!gpus || !procs || procs->processes.size() != size_t(gpu_processes)) wrong = true;
            benchmark::DoNotOptimize(procs);
        }
    });
    const std::string script_path = (root / "fake-rocm-smi").string();
    benchmark::RegisterBenchmark("BM_BackendsSample_cli", [&](benchmark::State& state) {
        for (auto _ : state) {
            pid_t pid = 0;
            char* const spawn_argv[] = {const_cast<char*>(script_path.c_str()), nullptr};
            if (posix_spawn(&pid, script_path.c_str(), nullptr, nullptr, spawn_argv, environ) !=
                0) {
                state.SkipWithError("posix_spawn failed");
                break;
            }
            int status = 0;
            waitpid(pid, &status, 0);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) wrong = true;
        }
    });

    CollectingReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
    fs::remove_all(root);

    const double targeted = reporter.times_ns["BM_BackendsSample_targeted"];
    const double sweep = reporter.times_ns["BM_BackendsSample_sweep"];
    const double cli = reporter.times_ns["BM_BackendsSample_cli"];
    std::printf("\nOne full sample: %d GPUs, %d GPU processes among %d processes (%d fds each)\n",
                kGpus, gpu_processes, processes, kFdsPerProcess);
    std::printf("  targeted fdinfo (gpuguard)   %10.1f us\n", targeted / 1e3);
    std::printf("  full /proc fd sweep (nvtop)  %10.1f us   %.1fx the targeted cost\n", sweep / 1e3,
                targeted > 0 ? sweep / targeted : 0);
    std::printf("  CLI spawn per sample         %10.1f us   %.1fx the targeted cost\n", cli / 1e3,
                targeted > 0 ? cli / targeted : 0);
    if (wrong || reporter.failed || targeted <= 0) {
        std::fprintf(stderr, "backends_bench: a variant returned wrong results\n");
        return 1;
    }
    return 0;
}
