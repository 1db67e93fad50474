#include "tests/agent/journal/journal_fixtures.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <limits>

#include <gtest/gtest.h>

#include "gpuguard/events/event_json.h"

namespace gpuguard::testing {

using namespace gpuguard::agent;

std::vector<Event> every_event_type(uint64_t ts_ns, uint32_t pid) {
    std::vector<Event> events;
    auto add = [&](EventData data) {
        Event event;
        event.ts_ns = ts_ns + events.size() * 1000;
        event.task = TaskInfo{pid, pid + 1, 1, 1000, 1000, 0x1234'5678'9abcull, "xmrig"};
        event.data = std::move(data);
        events.push_back(std::move(event));
    };
    add(GpuOpen{195, 0, 5, -100, 02000002, OpenSyscall::kOpenat, false, "/dev/nvidia0"});
    add(GpuOpen{0, 0, -13, 7, 0, OpenSyscall::kOpenat2, true, "renderD128"});
    add(GpuOpen{226, 128, 9, -100, 0, OpenSyscall::kCreat, false, std::string("/dev/\xff\xfe", 7)});
    add(GpuIoctl{195, 255, 5, 0xc0104629u, 0x7ffd'1234'5678ull});
    add(Connect{7, 0, 4, "198.51.100.7", 3333, true, true, false, false, false});
    add(Connect{8, -111, 6, "2001:db8::1", 14444, false, false, true, false, false});
    add(Connect{9, -115, 4, "127.0.0.1", 4444, false, true, false, true, true, "", true, true});
    // Found established in /proc when the process was watched.
    add(Connect{12, 0, 4, "198.51.100.9", 443, false, false, false, false, false, "pool.example",
                true, false, true});
    add(Exec{
        "/tmp/.x/xmrig", {"xmrig", "-o", "pool.example:3333", "--cuda", ""}, true, false, pid + 3});
    add(Exec{"", {}, false, true, 0});
    add(Fork{pid + 10, true});
    add(Fork{std::numeric_limits<uint32_t>::max(), false});
    add(Exit{0, false});
    add(Exit{9, true});
    add(Exit{3 << 8, true});
    Telemetry telemetry;
    telemetry.gpu_index = 1;
    telemetry.vendor = "nvidia";
    telemetry.model = "NVIDIA H100 80GB HBM3";
    telemetry.devices = {"195:0", "195:255", "511:0"};
    telemetry.utilization_percent = 97.5;
    telemetry.memory_used_bytes = 71ull << 30;
    telemetry.memory_total_bytes = 80ull << 30;
    telemetry.processes = {ProcessGpuUsage{pid, 1ull << 30, 88.25},
                           ProcessGpuUsage{pid + 1, std::nullopt, std::nullopt}};
    telemetry.power_watts = 612.5;
    telemetry.power_limit_watts = 700;
    telemetry.pipes = GpuPipes{.sm_active_percent = 97.0,
                               .tensor_active_percent = 0.0,
                               .fp32_active_percent = 0.5,
                               .integer_active_percent = 71.25,
                               .dram_active_percent = 4.0};
    telemetry.mig_pipes = {
        {1, GpuPipes{.tensor_active_percent = 0.0, .integer_active_percent = 70.0}},
        {2, GpuPipes{.tensor_active_percent = 41.5}}};
    telemetry.process_instances = {{pid, 1}, {pid + 1, 2}};
    telemetry.mig_nodes = {{1, "236:66"}, {1, "236:67"}, {2, "236:75"}};
    add(telemetry);
    add(Telemetry{0, "amd", "", {}, std::nullopt, std::nullopt, std::nullopt, {}});
    ProcessSnapshot snapshot;
    snapshot.exe = "/usr/bin/python3.11";
    snapshot.argv = {"python3", "train.py", "--epochs=3"};
    snapshot.user = "alice";
    snapshot.cgroup_path = "/system.slice/docker-0123.scope";
    snapshot.container_id = std::string(64, 'a');
    snapshot.container_runtime = "docker";
    snapshot.gpus = {SnapshotGpu{195, 0, 5}, SnapshotGpu{195, 255, -1}};
    add(snapshot);
    add(ProcessSnapshot{});
    ProcessSnapshot upgraded;
    upgraded.exe = "/usr/sbin/nvidia-persistenced (deleted)";
    upgraded.exe_package = "dpkg:nvidia-persistenced";
    add(upgraded);
    add(KillNow{"exec", "file", (259ull << 20) | 3, 1234567, 17, 0, 0, 0});
    add(KillNow{"gpu_open", "name", 0, 0, 4, -3, 195, 1});
    add(ExeScan{"/opt/x/svc-agent",
                std::string(64, 'a'),
                8123456,
                {"GG_XMRig_Executable"},
                {"GG-XMRIG-0011"},
                "",
                "",
                "",
                "unowned"});
    add(ExeScan{
        "/usr/bin/curl", std::string(64, 'b'), 260000, {}, {}, "", "", "dpkg:curl", "intact"});
    add(ExeScan{"/tmp/_MEI12/ffmpeg",
                std::string(64, 'd'),
                90000,
                {},
                {},
                "",
                "",
                "",
                "unowned",
                "refused: PyInstaller: no ancestor outside a temporary directory uses files from "
                "/tmp/_MEI12"});
    add(ExeScan{"/memfd:x (deleted)", "", 0, {}, {}, "larger than 67108864 bytes: not scanned"});
    // Not scanned, and why (the `unreadable` condition's kinds).
    ExeScan refused{"/mnt/fuse/svc", "", 0, {}, {}, "open /proc/42/exe: Permission denied"};
    refused.error_kind = "permission";
    add(refused);
    // Network intelligence (gpuguard/netintel/net_intel.h): a named connect, a payload sample, a
    // session.
    Connect named{10, 0, 4, "203.0.113.5", 443, true, false, false, false, false};
    named.domain = "pool.supportxmr.com";
    add(named);
    NetPayload payload;
    payload.fd = 10;
    payload.direction = NetPayload::Direction::kOut;
    payload.syscall = "sendto";
    payload.length = 700;
    payload.seq = 2;
    payload.flow = 0xffff'8880'1234'5678ull;
    payload.truncated = true;
    payload.followed = true;
    payload.local_address = "10.0.0.2";
    payload.local_port = 40000;
    payload.remote_address = "203.0.113.5";
    payload.remote_port = 443;
    payload.data = std::string("{\"method\":\"login\"}\n\0\xff", 21);
    add(payload);
    Stratum stratum;
    stratum.flow = payload.flow;
    stratum.protocol = "cryptonote";
    stratum.pool_address = "203.0.113.5";
    stratum.pool_port = 443;
    stratum.pool_domain = "pool.supportxmr.com";
    stratum.login = "4AdUndXH\u2026.rig1";
    stratum.agent = "XMRig/6.21.0";
    stratum.methods = {"login", "job", "submit"};
    stratum.messages = {R"({"method":"login","params":{"login":"4A"}})"};
    stratum.shares_submitted = 12;
    stratum.shares_accepted = 11;
    stratum.shares_rejected = 1;
    stratum.share_hashes = 120001.5;
    stratum.difficulty_updates = 3;
    stratum.hash_rate = 2.5e3;
    add(stratum);
    add(Stratum{});
    // The agent's YARA verdict on an executable (covers ExeScan in the round trip).
    add(ExeScan{"/tmp/.x/xmrig",
                std::string(64, 'a'),
                8'388'608,
                {"GG_Miner_Strings"},
                {"GG-XMRIG-0001"},
                ""});
    // ... and on a library its environment preloads.
    add(ExeScan{"/dev/shm/.x/libhook.so",
                std::string(64, 'c'),
                40'960,
                {"GG_Miner_Strings"},
                {"GG-XMRIG-0001"},
                "",
                "/dev/shm/.x/libhook.so"});
    // A GPU process's write counters: all present, none, and large values.
    add(ProcessIo{4096, 392, 2});
    add(ProcessIo{0, 212, 3, 1480, 4});
    add(ProcessIo{});
    add(ProcessIo{std::nullopt, 18446744073709551615ull, 1ull << 40});
    // Config file lines (one multi-line), a cut file, and one with no line.
    add(ConfigFile{"/opt/x/config.json",
                   "default",
                   1234,
                   std::string(64, 'c'),
                   false,
                   {{3, "    \"randomx\": {\n        \"1gb-pages\": false"},
                    {9, "\"url\": \"pool.supportxmr.com:3333\","}}});
    add(ConfigFile{"rig.ini", "argument", 1ull << 33, std::string(64, 'd'), true, {}});
    // A named file root could not read.
    ConfigFile unread{"/mnt/fuse/rig.json", "argument", 0, "", false, {}};
    unread.error = "/mnt/fuse/rig.json: Permission denied";
    add(unread);
    // A hidden process with its hiding library found, and one without.
    add(HiddenProcess{"getdents64",
                      {"/usr/local/lib/libsystem.so", "/tmp/.x/libhide.so"},
                      {"LD_PRELOAD of the agent names /tmp/.x/libhide.so",
                       "the agent's readdir resolves to /usr/local/lib/libsystem.so, not libc's"}});
    add(HiddenProcess{"process_table", {}, {}});
    // Kernel module loads: tainted, untainted, every bit.
    add(ModuleLoad{"diamorphine", (1u << 12) | (1u << 13)});
    add(ModuleLoad{"dummy", 0});
    add(ModuleLoad{std::string(55, 'n'), 0xffffffffu});
    // File changes: a preload write with its libraries, a resolved relative
    // rename, a watched process's unlink of an unlisted path.
    add(FileChange{"write",
                   "openat",
                   "preload",
                   "/etc/ld.so.preload",
                   "",
                   3,
                   -100,
                   01101,
                   false,
                   false,
                   {"/tmp/x/libhide.so", "/usr/lib/libfoo.so"}});
    add(FileChange{"rename", "renameat2", "cron", "/etc/cron.d/x", "x", 0, 5, 1, true, false, {}});
    add(FileChange{"unlink", "unlinkat", "", "/srv/y", "", 0, -100, 0x200, false, true, {}});
    // Environments: both variables (one empty), none, and unreadable.
    add(ProcessEnv{"/tmp/x/libinject.so", "", ""});
    add(ProcessEnv{
        "/dev/shm/x/libhide.so",
        "/opt/conda/envs/ml/lib:/usr/local/nvidia/lib",
        "",
        {LoaderPath{"LD_PRELOAD", "/dev/shm/x/libhide.so", "/dev/shm/x/libhide.so", "", 42, true},
         LoaderPath{"LD_LIBRARY_PATH", "/opt/conda/envs/ml/lib", "/opt/conda/envs/ml/lib",
                    "conda:/opt/conda/envs/ml", 86400, false},
         LoaderPath{"LD_LIBRARY_PATH", "/usr/local/nvidia/lib", "", "", -1, false}}});
    add(ProcessEnv{});
    add(ProcessEnv{std::nullopt, std::nullopt, "process 4242 is gone"});
    // What was done to the agent: a stop with its sender, a kernel-seen
    // signal not delivered, and a gap with negative and large times.
    add(AgentTamper{"stop", 15, 0, 0, 812, "/usr/bin/kill", {"kill", "-TERM", "812"}, "", 0, 0});
    add(AgentTamper{"signal", 19, -3, 0, 812, "", {}, "", 0, 0});
    add(AgentTamper{
        "bpf_command", 0, 0, 34, 812, "/usr/sbin/bpftool", {"bpftool"}, "link 7", 0, 0});
    add(AgentTamper{
        "down", 9, 0, 0, 811, "/usr/sbin/gpuguard", {}, "left behind", 1795755978427209580, -1});
    // A container in a Kubernetes pod, and one its runtime says nothing about.
    add(Container{std::string(64, 'a'), "podman",
                  ContainerDetails{"gg-miner", "localhost/gg-test-miner:1", std::string(64, 'e'),
                                   "miner-pod", "gg-ns", "0c7c-11e9", "miner"}});
    add(Container{std::string(64, 'b'), "containerd", {}});
    // A miner on every core of a 64-core host, and one that nearly stopped.
    add(CpuUsage{127'500'000'000ull, 2'000'000'000ull, 65});
    {
        Stratum interval;
        interval.protocol = "stratum1";
        interval.hash_rate = 4.295e9;
        interval.hash_rate_low = 1.17e9;
        interval.hash_rate_high = 1.1e10;
        add(interval);
    }
    add(CpuUsage{1, 18446744073709551615ull, 0});
    add(GpuLibraries{
        {"/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15", "/opt/miner/libnvrtc.so.12"},
        "runtime_only",
        {},
        ""});
    add(GpuLibraries{{}, "none", {}, "cannot read /proc/42/maps: No such file or directory"});
    // Who serves a loopback connection, and its connections off the host.
    add(LoopbackPeer{
        9050, 63400, "tor", "/usr/bin/tor", true, {"185.220.101.44:9001", "[2001:db8::44]:443"}});
    add(LoopbackPeer{1080, 900, "", "", false, {}});
    // The agent's probe of a suspected pool: answered as one over TLS, and refused.
    add(PoolProbe{"203.0.113.7",
                  8443,
                  true,
                  "cdn.example.net",
                  "GG-CORR-0023",
                  "stratum1",
                  R"({"id":1,"method":"mining.subscribe","params":["gpuguard-probe/1.0"]})",
                  R"({"id":1,"result":[[["mining.notify","ae68"]],"08000002",4],"error":null})",
                  true,
                  "pool: stratum1 mining.subscribe answered with a subscription",
                  {"stratum1: pool: stratum1 mining.subscribe answered with a subscription"},
                  212});
    add(PoolProbe{"169.254.169.254",
                  80,
                  false,
                  "",
                  "GG-CORR-0013",
                  "",
                  "",
                  "",
                  false,
                  "refused: link-local address",
                  {},
                  0});
    // A Slurm job's step on its GRES GPU, and a pod given no GPU.
    {
        Workload job;
        job.scheduler = "slurm";
        job.slurm = SlurmJob{"4242", "0", "alice", "physics", "gpu", "1"};
        job.allocation_source = "SLURM_JOB_GPUS";
        job.allocation = "1";
        job.allocated = {"195:1"};
        job.node_gpus = {"195:0", "195:1"};
        add(job);
        Workload pod;
        pod.scheduler = "kubernetes";
        pod.allocation_source = "NVIDIA_VISIBLE_DEVICES";
        pod.allocation = "GPU-8f3c0d2e";
        pod.unresolved = "'GPU-8f3c0d2e' is not a GPU index (a UUID or MIG instance)";
        add(pod);
        // A pod the kubelet's PodResources API named, its container given GPU 0.
        Workload kubelet_pod;
        kubelet_pod.scheduler = "kubernetes";
        kubelet_pod.allocation_source = "kubelet";
        kubelet_pod.allocation = "0";
        kubelet_pod.allocated = {"195:0"};
        kubelet_pod.pod_namespace = "ml";
        kubelet_pod.pod_name = "trainer-0";
        kubelet_pod.pod_uid = "5f1c2a3b-0d4e-4f60-8a7b-9c0d1e2f3a4b";
        kubelet_pod.container = "worker";
        add(kubelet_pod);
    }
    // An Xid a holder's kernels caused, a double-bit ECC error, a clock change.
    add(GpuFault{0, {"195:0", "195:255"}, "xid", 31, 1});
    add(GpuFault{1, {"195:1"}, "ecc_double_bit", 0, 2});
    add(GpuFault{0, {}, "clocks", 0x24, 0});
    // A command line read again past the exec record's cut, one rewritten
    // since, one cut at 64 KiB.
    add(ProcessCmdline{{"/tmp/x", std::string(1100, 'p'), "-o", "pool:3333"}, false, true});
    add(ProcessCmdline{{"nginx: worker process"}, false, false});
    add(ProcessCmdline{{"/tmp/x", std::string(65530, 'q')}, true, true});
    // A pool's shape over IPv6 and a young flow with nothing received.
    {
        Flow pool;
        pool.flow = 18446612686773362688ull;
        pool.address = "2001:db8::77";
        pool.port = 443;
        pool.age_ns = 390'000'000'000;
        pool.since_send_ns = 12'000'000'000;
        pool.since_receive_ns = 4'000'000'000;
        pool.bytes_out = 9120;
        pool.bytes_in = 21780;
        pool.sends = 30;
        pool.receives = 54;
        pool.send_bursts = 24;
        pool.receive_bursts = 27;
        pool.pushes = 25;
        pool.replies = 2;
        pool.send_gaps = {{8, 15}, {16, 8}};
        pool.receive_gaps = {{1, 1}, {16, 17}, {128, 4294967295u}};
        add(pool);
        Flow young;
        young.address = "198.51.100.7";
        young.port = 8443;
        young.age_ns = 30'000'000'000;
        young.since_send_ns = 18446744073709551615ull;
        young.sends = 1;
        young.send_bursts = 1;
        add(young);
    }
    // A drop-in written by a shell, the reload that took it in, and a
    // package manager's write.
    add(TrustChange{"write",
                    "",
                    {"/etc/gpuguard/rules.d/50-allow.yaml"},
                    "write",
                    "other",
                    "",
                    "/usr/bin/bash",
                    {"sh", "-c", "cat > /etc/gpuguard/rules.d/50-allow.yaml"},
                    {},
                    {},
                    {},
                    {}});
    add(TrustChange{"reload",
                    "rules",
                    {"/etc/gpuguard/rules.d/50-allow.yaml"},
                    "write",
                    "other",
                    "",
                    "/usr/bin/bash",
                    {"sh"},
                    {"allowlist.exe_paths + /opt/x/*"},
                    {"GG-PORT-0001 action kill -> alert (50-allow.yaml:3)"},
                    {"GG-CORR-0002 disabled (GPU process connecting to a mining pool)"},
                    {"GG-X added"}});
    add(TrustChange{"write",
                    "",
                    {"/usr/sbin/gpuguard"},
                    "rename",
                    "package_manager",
                    "under /usr/bin/dpkg (pid 812, dpkg:dpkg)",
                    "/usr/bin/dpkg",
                    {},
                    {},
                    {},
                    {},
                    {}});
    return events;
}

Event numbered_event(uint64_t index, uint64_t base_ns, uint64_t step_ns) {
    Event event;
    event.ts_ns = base_ns + index * step_ns;
    const auto pid = static_cast<uint32_t>(1000 + index % 7);
    event.task = TaskInfo{pid, pid, 1, 0, 0, 42, "worker-" + std::to_string(index % 7)};
    switch (index % 3) {
        case 0:
            event.data = GpuIoctl{195, 0, 5, 0xc0104629u, index};
            break;
        case 1:
            event.data = Connect{3, 0, 4, "203.0.113.9", 3333, true, false, false, false, false};
            break;
        default:
            event.data = Exec{
                "/usr/bin/worker", {"worker", "--n", std::to_string(index)}, false, false, pid};
    }
    return event;
}

journal::JournalOptions test_options(const std::filesystem::path& dir) {
    journal::JournalOptions options;
    options.dir = dir;
    options.fsync_interval_ms = 0;
    options.retention_max_bytes = 0;
    options.retention_max_age_s = 0;
    options.segment_max_age_s = 0;
    options.lookback_s = 0;
    return options;
}

journal::JournalIdentity test_identity() {
    journal::JournalIdentity identity;
    identity.host =
        HostInfo{"testhost", "0f0e0d0c-0b0a-0908-0706-050403020100", "6.18.0-test", "0.1.0-test"};
    identity.rule_pack_version = "rules-2026.11";
    return identity;
}

std::vector<journal::JournalRecord> read_all(const std::filesystem::path& path,
                                             journal::ReaderOptions options) {
    std::vector<journal::JournalRecord> records;
    auto reader = journal::JournalReader::open({path}, std::move(options));
    EXPECT_TRUE(reader.ok()) << (reader.ok() ? "" : reader.error().message);
    if (!reader) return records;
    journal::JournalRecord record;
    while (reader->next(record)) records.push_back(record);
    return records;
}

std::vector<std::string> event_jsons(const std::vector<journal::JournalRecord>& records) {
    std::vector<std::string> out;
    for (const auto& record : records) {
        if (record.kind == journal::RecordKind::kEvent)
            out.push_back(event_to_json(record.event, 0));
    }
    return out;
}

std::string read_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::filesystem::path> segment_paths(const std::filesystem::path& dir) {
    std::vector<std::filesystem::path> paths;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() == ".ggj") paths.push_back(entry.path());
    }
    std::sort(paths.begin(), paths.end());
    return paths;
}

std::unique_ptr<agent::journal::JournalWriter> open_writer(agent::journal::JournalOptions options,
                                                           std::vector<agent::Event> snapshot) {
    auto writer = agent::journal::JournalWriter::open(
        std::move(options), test_identity(), std::move(snapshot), {{195, std::nullopt, "nvidia"}});
    EXPECT_TRUE(writer.ok()) << (writer.ok() ? "" : writer.error().message);
    return writer ? std::move(writer).value() : nullptr;
}

}  // namespace gpuguard::testing
