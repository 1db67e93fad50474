#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <nlohmann/json.hpp>

#include "events.h"
#include "gpuguard/events/agent_tamper.h"
#include "gpuguard/events/event.h"
#include "gpuguard/events/event_json.h"

namespace gpuguard::agent {
namespace {

gg_gpu_open_event sample_record() {
    gg_gpu_open_event raw{};
    raw.hdr.type = GG_EVENT_GPU_OPEN;
    raw.hdr.abi_major = GG_ABI_MAJOR;
    raw.hdr.size = sizeof(raw);
    raw.hdr.ts_ns = 1'000'000'123;
    raw.task.tgid = 4242;
    raw.task.pid = 4243;
    raw.task.ppid = 1;
    raw.task.uid = 1000;
    raw.task.gid = 100;
    raw.task.cgroup_id = 77;
    std::memcpy(raw.task.comm, "xmrig", 6);
    raw.major = 195;
    raw.minor = 0;
    raw.ret = 5;
    raw.dirfd = AT_FDCWD;
    raw.open_flags = O_RDWR | O_CLOEXEC;
    raw.syscall = GG_SYS_OPENAT2;
    const char path[] = "/dev/nvidia0";
    std::memcpy(raw.path, path, sizeof(path));
    raw.path_len = sizeof(path);
    return raw;
}

std::span<const std::byte> bytes_of(const void* data, size_t size) {
    return {static_cast<const std::byte*>(data), size};
}

// The one list of record types: every type the BPF programs can emit has
// a counter name and a decoder (a header alone is too short for its body,
// never an unknown type), names are unique, and the end marker is no type.
TEST(EventDecode, every_record_type_has_a_name_and_a_decoder) {
    std::vector<std::string> names;
    for (uint32_t type = 1; type < GG_EVENT_TYPE_MAX; ++type) {
        const char* name = gpuguard::agent::record_type_name(type);
        ASSERT_NE(name, nullptr) << "record type " << type << " has no name";
        EXPECT_EQ(std::count(names.begin(), names.end(), name), 0) << name;
        names.emplace_back(name);
        gg_event_header header{};
        header.type = static_cast<__u16>(type);
        header.abi_major = GG_ABI_MAJOR;
        header.size = sizeof(header);
        std::vector<std::byte> record(sizeof(header));
        std::memcpy(record.data(), &header, sizeof(header));
        auto decoded = gpuguard::agent::decode_record(record);
        ASSERT_FALSE(decoded) << name;
        EXPECT_EQ(decoded.error().message.find("unknown record type"), std::string::npos)
            << name << ": " << decoded.error().message;
    }
    EXPECT_EQ(gpuguard::agent::record_type_name(0), nullptr);
    EXPECT_EQ(gpuguard::agent::record_type_name(GG_EVENT_TYPE_MAX), nullptr);
}

TEST(EventDecode, decodes_a_gpu_open_record) {
    const auto raw = sample_record();
    auto event = decode_record(bytes_of(&raw, sizeof(raw)));
    ASSERT_TRUE(event.ok()) << event.error().message;
    EXPECT_EQ(event->ts_ns, 1'000'000'123u);
    EXPECT_EQ(event->task.pid, 4242u);
    EXPECT_EQ(event->task.tid, 4243u);
    EXPECT_EQ(event->task.comm, "xmrig");
    EXPECT_EQ(event->task.cgroup_id, 77u);
    const auto& open = std::get<GpuOpen>(event->data);
    EXPECT_EQ(open.major, 195u);
    EXPECT_EQ(open.result, 5);
    EXPECT_EQ(open.syscall, OpenSyscall::kOpenat2);
    EXPECT_FALSE(open.path_truncated);
    EXPECT_EQ(open.path, "/dev/nvidia0");
    EXPECT_STREQ(event_type_name(*event), "gpu_open");
}

TEST(EventDecode, decodes_a_module_load_record_with_the_kernels_taint_letters) {
    gg_module_load_event raw{};
    raw.hdr.type = GG_EVENT_MODULE_LOAD;
    raw.hdr.abi_major = GG_ABI_MAJOR;
    raw.hdr.size = sizeof(raw);
    raw.hdr.ts_ns = 77;
    raw.task.tgid = 900;
    raw.task.pid = 900;
    raw.task.ppid = 899;
    std::memcpy(raw.task.comm, "insmod", 7);
    raw.taints = (1u << 12) | (1u << 13);          // TAINT_OOT_MODULE | TAINT_UNSIGNED_MODULE
    std::memset(raw.name, 'm', sizeof(raw.name));  // no NUL: bounded by the array
    auto event = decode_record(bytes_of(&raw, sizeof(raw)));
    ASSERT_TRUE(event.ok()) << event.error().message;
    EXPECT_EQ(event->task.pid, 900u);
    EXPECT_EQ(event->task.comm, "insmod");
    const auto& module = std::get<ModuleLoad>(event->data);
    EXPECT_EQ(module.name, std::string(GG_MODULE_NAME_LEN, 'm'));
    EXPECT_EQ(module_taint_letters(module.taints), "OE");
    EXPECT_STREQ(event_type_name(*event), "module_load");
    EXPECT_FALSE(decode_record(bytes_of(&raw, sizeof(raw) - 1)).ok()) << "short record";
}

TEST(EventDecode, decodes_an_agent_signal_record_as_agent_tamper_naming_the_sender) {
    gg_agent_signal_event raw{};
    raw.hdr.type = GG_EVENT_AGENT_SIGNAL;
    raw.hdr.abi_major = GG_ABI_MAJOR;
    raw.hdr.size = sizeof(raw);
    raw.hdr.ts_ns = 88;
    raw.task.tgid = 5101;
    raw.task.pid = 5101;
    raw.task.uid = 1000;
    std::memcpy(raw.task.comm, "kill", 5);
    raw.sig = 19;  // SIGSTOP
    raw.result = 1;
    raw.target_tgid = 812;
    raw.target_pid = 815;  // one of its threads: the agent is the tgid
    auto event = decode_record(bytes_of(&raw, sizeof(raw)));
    ASSERT_TRUE(event.ok()) << event.error().message;
    EXPECT_EQ(event->ts_ns, 88u);
    EXPECT_EQ(event->task.pid, 5101u);
    EXPECT_STREQ(event_type_name(*event), "agent_tamper");
    const auto& tamper = std::get<AgentTamper>(event->data);
    EXPECT_EQ(tamper.kind, "signal");
    EXPECT_EQ(tamper.signal, 19);
    EXPECT_EQ(tamper.result, 1);
    EXPECT_EQ(tamper.agent_pid, 812u);
    EXPECT_EQ(describe_agent_tamper(event->task, tamper),
              "SIGSTOP to the agent (pid 812) from pid 5101 (kill), uid 1000 (ignored by the "
              "agent)");
    EXPECT_FALSE(decode_record(bytes_of(&raw, sizeof(raw) - 1)).ok()) << "short record";
}

TEST(EventDecode, decodes_a_bpf_command_record_naming_the_object_and_a_failure) {
    gg_bpf_command_event raw{};
    raw.hdr.type = GG_EVENT_BPF_COMMAND;
    raw.hdr.abi_major = GG_ABI_MAJOR;
    raw.hdr.size = sizeof(raw);
    raw.task.tgid = 5201;
    raw.task.pid = 5201;
    std::memcpy(raw.task.comm, "bpftool", 8);
    raw.cmd = BPF_LINK_DETACH;
    raw.fd = 3;
    raw.agent_tgid = 812;
    raw.object_id = 41;
    auto event = decode_record(bytes_of(&raw, sizeof(raw)));
    ASSERT_TRUE(event.ok()) << event.error().message;
    auto tamper = std::get<AgentTamper>(event->data);
    EXPECT_EQ(tamper.kind, "bpf_command");
    EXPECT_EQ(tamper.command, static_cast<uint32_t>(BPF_LINK_DETACH));
    EXPECT_EQ(tamper.agent_pid, 812u);
    EXPECT_EQ(tamper.detail, "link id 41 (fd 3)");
    raw.cmd = BPF_PROG_DETACH;
    raw.attach_type = 2;
    raw.ret = -EPERM;
    event = decode_record(bytes_of(&raw, sizeof(raw)));
    ASSERT_TRUE(event.ok()) << event.error().message;
    tamper = std::get<AgentTamper>(event->data);
    EXPECT_EQ(tamper.detail,
              "program id 41 (fd 3), attach type 2, failed: Operation not permitted");
    EXPECT_FALSE(decode_record(bytes_of(&raw, sizeof(raw) - 1)).ok()) << "short record";
}

TEST(EventDecode, taint_letters_follow_the_kernels_table_both_ways) {
    EXPECT_EQ(module_taint_letters(0), "");
    EXPECT_EQ(module_taint_letters(1u << 0), "P");
    EXPECT_EQ(module_taint_letters((1u << 0) | (1u << 12)), "PO");
    EXPECT_EQ(module_taint_letters((1u << 10) | (1u << 15)), "CK");
    EXPECT_EQ(module_taint_letters(1u << 31), "?");
    EXPECT_EQ(module_taint_bits("OE"), (1u << 12) | (1u << 13));
    EXPECT_EQ(module_taint_bits(""), 0u);
    EXPECT_FALSE(module_taint_bits("Z"));
    for (uint32_t bit = 0; bit < 20; ++bit) {
        EXPECT_EQ(module_taint_bits(module_taint_letters(1u << bit)), 1u << bit) << bit;
    }
}

TEST(EventDecode, decodes_file_change_records_and_rejects_unknown_syscalls_and_kinds) {
    gg_file_change_event raw{};
    raw.hdr.type = GG_EVENT_FILE_CHANGE;
    raw.hdr.abi_major = GG_ABI_MAJOR;
    raw.hdr.size = sizeof(raw);
    raw.hdr.ts_ns = 7;
    raw.task.tgid = 31;
    std::memcpy(raw.task.comm, "mv", 3);
    raw.dirfd = 9;
    raw.open_flags = 1;
    raw.syscall = GG_FILE_SYS_RENAMEAT2;
    raw.category = GG_FILE_CAT_PRELOAD;
    raw.flags = GG_FILE_WATCHED_TGID;
    const char path[] = "ld.so.preload";
    std::memcpy(raw.path, path, sizeof(path));
    raw.path_len = sizeof(path);
    auto event = decode_record(bytes_of(&raw, sizeof(raw)));
    ASSERT_TRUE(event.ok()) << event.error().message;
    const auto& change = std::get<FileChange>(event->data);
    EXPECT_EQ(change.operation, "rename");
    EXPECT_EQ(change.syscall, "renameat2");
    EXPECT_EQ(change.kind, "preload");
    EXPECT_EQ(change.path, "ld.so.preload");
    EXPECT_EQ(change.dirfd, 9);
    EXPECT_EQ(change.flags, 1u);
    EXPECT_TRUE(change.watched_process);
    EXPECT_FALSE(change.path_truncated);
    EXPECT_STREQ(event_type_name(*event), "file_change");

    raw.syscall = GG_FILE_SYS_UNLINKAT + 1;
    EXPECT_FALSE(decode_record(bytes_of(&raw, sizeof(raw))).ok());
    raw.syscall = GG_FILE_SYS_UNLINK;
    raw.category = GG_FILE_CAT_AGENT_CONFIG;  // the agent's own files
    auto own = decode_record(bytes_of(&raw, sizeof(raw)));
    ASSERT_TRUE(own.ok()) << own.error().message;
    EXPECT_EQ(std::get<FileChange>(own->data).kind, "agent_config");
    raw.category = GG_FILE_CAT_AGENT_CONFIG + 1;
    EXPECT_FALSE(decode_record(bytes_of(&raw, sizeof(raw))).ok());
}

TEST(EventDecode, comm_and_path_without_nul_stay_bounded) {
    auto raw = sample_record();
    std::memset(raw.task.comm, 'c', sizeof(raw.task.comm));
    std::memset(raw.path, 'p', sizeof(raw.path));
    raw.path_len = 100000;  // lies: must be clamped to the buffer
    auto event = decode_record(bytes_of(&raw, sizeof(raw)));
    ASSERT_TRUE(event.ok());
    EXPECT_EQ(event->task.comm.size(), sizeof(raw.task.comm));
    EXPECT_EQ(std::get<GpuOpen>(event->data).path.size(), sizeof(raw.path));
}

TEST(EventDecode, rejects_malformed_records) {
    auto raw = sample_record();
    EXPECT_FALSE(decode_record(bytes_of(&raw, 8)).ok());                // shorter than a header
    EXPECT_FALSE(decode_record(bytes_of(&raw, sizeof(raw) - 1)).ok());  // size claims more

    auto wrong_abi = raw;
    wrong_abi.hdr.abi_major = GG_ABI_MAJOR + 1;
    auto decoded = decode_record(bytes_of(&wrong_abi, sizeof(wrong_abi)));
    ASSERT_FALSE(decoded.ok());
    EXPECT_NE(decoded.error().message.find("ABI"), std::string::npos);

    auto unknown = raw;
    unknown.hdr.type = 999;
    EXPECT_FALSE(decode_record(bytes_of(&unknown, sizeof(unknown))).ok());

    auto bad_syscall = raw;
    bad_syscall.syscall = 9;
    EXPECT_FALSE(decode_record(bytes_of(&bad_syscall, sizeof(bad_syscall))).ok());

    auto truncated_body = raw;
    truncated_body.hdr.size = sizeof(gg_event_header) + 4;
    EXPECT_FALSE(decode_record(bytes_of(&truncated_body, sizeof(truncated_body))).ok());
}

TEST(EventJson, successful_open_has_documented_fields) {
    const auto raw = sample_record();
    auto event = decode_record(bytes_of(&raw, sizeof(raw)));
    ASSERT_TRUE(event.ok());
    // realtime = monotonic + offset: 1.000000123 s + 1 700 000 000 s
    const auto line = event_to_json(*event, 1'700'000'000LL * 1'000'000'000LL);
    EXPECT_EQ(line.find('\n'), std::string::npos);
    const auto json = nlohmann::json::parse(line);
    EXPECT_EQ(json["v"], 1);
    EXPECT_EQ(json["type"], "gpu_open");
    EXPECT_EQ(json["ts_ns"], 1'000'000'123u);
    EXPECT_EQ(json["time"], "2023-11-14T22:13:21.000000123Z");
    EXPECT_EQ(json["process"]["pid"], 4242);
    EXPECT_EQ(json["process"]["tid"], 4243);
    EXPECT_EQ(json["process"]["ppid"], 1);
    EXPECT_EQ(json["process"]["uid"], 1000);
    EXPECT_EQ(json["process"]["gid"], 100);
    EXPECT_EQ(json["process"]["comm"], "xmrig");
    EXPECT_EQ(json["process"]["cgroup_id"], 77);
    const auto& open = json["gpu_open"];
    EXPECT_EQ(open["syscall"], "openat2");
    EXPECT_EQ(open["device"], "195:0");
    EXPECT_EQ(open["major"], 195);
    EXPECT_EQ(open["minor"], 0);
    EXPECT_EQ(open["fd"], 5);
    EXPECT_TRUE(open["error"].is_null());
    EXPECT_EQ(open["flags"], "O_RDWR|O_CLOEXEC");
    EXPECT_EQ(open["open_flags"], O_RDWR | O_CLOEXEC);
    EXPECT_EQ(open["dirfd"], AT_FDCWD);
    EXPECT_EQ(open["path"], "/dev/nvidia0");
    EXPECT_EQ(open["path_truncated"], false);
    // Key order is stable: readers of raw lines see type and time first.
    EXPECT_EQ(line.rfind("{\"v\":1,\"type\":\"gpu_open\",\"ts_ns\":", 0), 0u) << line;
}

TEST(EventJson, failed_open_reports_errno_name) {
    auto raw = sample_record();
    raw.ret = -EACCES;
    raw.major = 0;
    raw.syscall = GG_SYS_CREAT;
    raw.flags = GG_OPEN_PATH_MATCH;
    auto event = decode_record(bytes_of(&raw, sizeof(raw)));
    ASSERT_TRUE(event.ok());
    const auto json = nlohmann::json::parse(event_to_json(*event, 0));
    EXPECT_EQ(json["gpu_open"]["syscall"], "creat");
    EXPECT_TRUE(json["gpu_open"]["device"].is_null());
    EXPECT_EQ(json["gpu_open"]["errno"], EACCES);
    EXPECT_EQ(json["gpu_open"]["error"], "EACCES");
    EXPECT_FALSE(json["gpu_open"].contains("fd"));
}

TEST(EventJson, invalid_utf8_in_path_still_gives_valid_json) {
    auto raw = sample_record();
    const char hostile[] = "/dev/dri/\xff\xfe\"\n\\card0";
    std::memcpy(raw.path, hostile, sizeof(hostile));
    raw.path_len = sizeof(hostile);
    auto event = decode_record(bytes_of(&raw, sizeof(raw)));
    ASSERT_TRUE(event.ok());
    const auto line = event_to_json(*event, 0);
    EXPECT_EQ(line.find('\n'), std::string::npos);
    const auto json = nlohmann::json::parse(line);
    EXPECT_NE(json["gpu_open"]["path"].get<std::string>().find("card0"), std::string::npos);
}

TEST(EventJson, open_flags_render_multi_bit_flags_and_unknown_bits) {
    EXPECT_EQ(open_flags_to_string(O_RDONLY), "O_RDONLY");
    EXPECT_EQ(open_flags_to_string(O_WRONLY | O_CREAT | O_TRUNC), "O_WRONLY|O_CREAT|O_TRUNC");
    EXPECT_EQ(open_flags_to_string(O_RDWR | O_SYNC), "O_RDWR|O_SYNC");
    EXPECT_EQ(open_flags_to_string(O_RDWR | O_DSYNC), "O_RDWR|O_DSYNC");
    EXPECT_EQ(open_flags_to_string(O_RDWR | O_TMPFILE), "O_RDWR|O_TMPFILE");
    EXPECT_EQ(open_flags_to_string(O_RDONLY | O_DIRECTORY), "O_RDONLY|O_DIRECTORY");
    EXPECT_EQ(open_flags_to_string(O_RDONLY | (1ULL << 40)), "O_RDONLY|0x10000000000");
}

}  // namespace
}  // namespace gpuguard::agent
