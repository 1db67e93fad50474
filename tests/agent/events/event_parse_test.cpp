// The JSON Lines form read back: every event type survives a round trip
// byte for byte, hand-written events with only the defining fields parse,
// and bad input is rejected naming the field.
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpuguard/events/event_json.h"

namespace gpuguard::agent {
namespace {

constexpr int64_t kOffset = 1'790'000'000'000'000'000;  // 2026-09-21, any fixed offset

Event with_task(EventData data) {
    Event event;
    event.ts_ns = 5'000'000'123;
    event.task = TaskInfo{4242, 4243, 1000, 1001, 1002, 77, "xmrig"};
    event.data = std::move(data);
    return event;
}

std::vector<Event> one_of_each() {
    GpuOpen open{195, 0, 5, -100, 02000002, OpenSyscall::kOpenat2, false, "/dev/nvidia0"};
    GpuOpen failed{0, 0, -13, -100, 0, OpenSyscall::kOpen, true, "/dev/dri/card0"};
    GpuIoctl ioctl{195, 255, 4, 0xc020462a, 0x7ffd1234};
    Connect connect{7, -115, 4, "10.1.2.3", 3333, true, false, false, true, false};
    Connect connect6{8, 0, 6, "2001:db8::1", 443, false, true, true, false, false};
    connect6.watched_tgid = true;  // reasons watched_process, watched_address
    connect6.watched_addr = true;
    Exec exec{
        "/tmp/.x/xmrig", {"xmrig", "-o", "stratum+tcp://pool:3333", "--cuda"}, true, false, 4243};
    Telemetry telemetry{
        1,           "nvidia",
        "H100",      {"195:1", "226:129"},
        97.5,        40ull << 30,
        80ull << 30, {{4242, 30ull << 30, 95.0}, {4300, std::nullopt, std::nullopt}}};
    ProcessSnapshot snapshot{"/usr/bin/python3.11",
                             {"python3", "train.py"},
                             "alice",
                             "/system.slice/docker-abc.scope",
                             std::string(64, 'a'),
                             "docker",
                             {{195, 0, 3}, {195, 255, 4}},
                             "dpkg:python3.11-minimal"};
    KillNow kill{"gpu_open", "file", 0x800001, 1234, 7, 0, 195, 0};
    ExeScan scan{"/tmp/.x/xmrig", std::string(64, 'b'), 8 << 20, {"xmrig"}, {"GG-M001"}, ""};
    NetPayload payload;
    payload.fd = 5;
    payload.direction = NetPayload::Direction::kIn;
    payload.syscall = "recvfrom";
    payload.length = 9;
    payload.seq = 2;
    payload.flow = 0xffff888000001234ull;
    payload.stream = false;
    payload.dns = true;
    payload.local_address = "10.0.0.2";
    payload.local_port = 40000;
    payload.remote_address = "10.0.0.53";
    payload.remote_port = 53;
    payload.data = std::string("\x12\x34\x81\x80\0\xff", 6);
    Stratum stratum;
    stratum.flow = 77;
    stratum.protocol = "stratum1";
    stratum.pool_address = "1.2.3.4";
    stratum.pool_port = 3333;
    stratum.methods = {"mining.subscribe", "mining.submit"};
    stratum.messages = {R"({"method":"mining.subscribe"})"};
    stratum.shares_submitted = 3;
    stratum.share_hashes = 65536;
    stratum.hash_rate = 1.5e6;
    std::vector<Event> events{
        with_task(open),
        with_task(failed),
        with_task(ioctl),
        with_task(connect),
        with_task(connect6),
        with_task(exec),
        with_task(Fork{4300, true}),
        with_task(Fork{4301, false, 5'735'514'198'765ull}),
        with_task(Exec{"/dev/fd/4", {"x"}, false, false, 4302, "/opt/x (deleted)"}),
        with_task(Exit{0x0900, true}),
        with_task(Exit{0x0300, false}),
        with_task(telemetry),
        with_task(snapshot),
        with_task(kill),
        with_task(scan),
        with_task(ExeScan{"/dev/shm/.x/libhook.so",
                          std::string(64, 'c'),
                          4096,
                          {"xmrig"},
                          {"GG-M001"},
                          "",
                          "/dev/shm/.x/libhook.so"}),
        with_task(payload),
        with_task(stratum),
        with_task(ProcessIo{1 << 20, 4096, 3}),
        with_task(ConfigFile{"/opt/x/config.json",
                             "argument",
                             812,
                             std::string(64, 'e'),
                             true,
                             {{9, "\"url\": \"pool.supportxmr.com:3333\","}, {12, "a\nb \u00e9"}}}),
        with_task(HiddenProcess{"getdents64",
                                {"/usr/local/lib/libsystem.so"},
                                {"/etc/ld.so.preload (the agent's mount namespace) preloads "
                                 "/usr/local/lib/libsystem.so"}}),
        with_task(HiddenProcess{"process_table", {}, {}})};
    events.push_back(with_task(ModuleLoad{"diamorphine", (1u << 12) | (1u << 13)}));
    events.push_back(with_task(ModuleLoad{"dummy", 0}));
    events.push_back(with_task(FileChange{"rename",
                                          "renameat",
                                          "preload",
                                          "/etc/ld.so.preload",
                                          "ld.so.preload",
                                          0,
                                          7,
                                          0,
                                          true,
                                          true,
                                          {"/tmp/x/libhide.so"}}));
    events.push_back(with_task(ProcessEnv{"/tmp/x/libinject.so", "/opt/x:/usr/lib", ""}));
    events.push_back(with_task(ProcessEnv{
        "/tmp/x/libinject.so",
        "/opt/x",
        "",
        {LoaderPath{"LD_PRELOAD", "/tmp/x/libinject.so", "/tmp/x/libinject.so", "", 3, false},
         LoaderPath{"LD_LIBRARY_PATH", "/opt/x", "/opt/x", "dpkg:x", 86400, true}}}));
    events.push_back(with_task(
        AgentTamper{"stop", 15, 0, 0, 812, "/usr/bin/kill", {"kill", "-TERM", "812"}, "", 0, 0}));
    events.push_back(with_task(AgentTamper{"down",
                                           9,
                                           -3,
                                           34,
                                           811,
                                           "/usr/sbin/gpuguard",
                                           {},
                                           "left behind",
                                           1795755978427209580,
                                           1795755985427209580}));
    events.push_back(with_task(Container{
        std::string(64, 'a'), "cri-o",
        ContainerDetails{"worker", "quay.io/w:3", "abcd", "job-x", "batch", "", "worker"}}));
    return events;
}

TEST(EventParse, EveryTypeRoundTripsByteForByte) {
    for (const Event& event : one_of_each()) {
        const std::string line = event_to_json(event, kOffset);
        auto parsed = event_from_json(line, "test:1");
        ASSERT_TRUE(parsed) << parsed.error().message << "\n" << line;
        EXPECT_EQ(event_to_json(parsed->event, kOffset), line);
        ASSERT_TRUE(parsed->time_unix_ns);
        EXPECT_EQ(*parsed->time_unix_ns, static_cast<int64_t>(event.ts_ns) + kOffset);
    }
}

// Field lookups do not depend on where a key sits in its object: the same
// line with every object's keys reversed reads the same, on the fast path.
nlohmann::ordered_json reversed_keys(const nlohmann::ordered_json& value) {
    if (value.is_array()) {
        nlohmann::ordered_json out = nlohmann::ordered_json::array();
        for (const auto& item : value) out.push_back(reversed_keys(item));
        return out;
    }
    if (!value.is_object()) return value;
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    std::vector<std::string> keys;
    for (const auto& [key, item] : value.items()) keys.push_back(key);
    for (auto key = keys.rbegin(); key != keys.rend(); ++key) {
        out[*key] = reversed_keys(value.at(*key));
    }
    return out;
}

TEST(EventParse, FieldOrderDoesNotMatter) {
    EventJsonReader reader;
    for (const Event& event : one_of_each()) {
        const std::string line = event_to_json(event, kOffset);
        const std::string reversed = reversed_keys(nlohmann::ordered_json::parse(line)).dump();
        ASSERT_NE(reversed, line);
        auto parsed = reader.parse(reversed, "test:1");
        ASSERT_TRUE(parsed) << parsed.error().message << "\n" << reversed;
        EXPECT_EQ(event_to_json(parsed->event, kOffset), line) << reversed;
    }
    EXPECT_EQ(reader.exact_parses(), 0u) << "the fast path read every line itself";
}

// An object with more members than the fast path lists in place (hand-written
// extras; no event has that many) is read by the exact parser, with the same
// result: the last of a repeated name winning.
TEST(EventParse, ManyMembersAreReadByTheExactParser) {
    std::string extras;
    for (int i = 0; i < 40; ++i)
        extras += ",\"extra_" + std::to_string(i) + "\":" + std::to_string(i);
    EventJsonReader reader;
    auto parsed =
        reader.parse(R"({"type":"fork","ts_ns":1,"process":{"pid":1)" + extras +
                         R"(,"pid":2},"fork":{"child_pid":3)" + extras + R"(,"child_pid":4}})",
                     "x");
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_EQ(parsed->event.task.pid, 2u);
    EXPECT_EQ(std::get<Fork>(parsed->event.data).child_pid, 4u);
    EXPECT_EQ(reader.exact_parses(), 1u);
}

// A result of INT32_MIN (no kernel returns it; a damaged or forged record
// can hold it) is written as errno 2147483648 and read back, with no
// overflow on the way (found by fuzz.event_decode).
TEST(EventParse, MostNegativeResultRoundTrips) {
    Event open_event;
    open_event.ts_ns = 5;
    open_event.task.pid = 7;
    open_event.data = GpuOpen{
        195,           0, std::numeric_limits<int32_t>::min(), -100, 2, OpenSyscall::kOpenat, false,
        "/dev/nvidia0"};
    Event connect_event = open_event;
    connect_event.data = Connect{
        3,    std::numeric_limits<int32_t>::min(), 4, "10.0.0.1", 3333, true, false, false, false,
        false};
    for (const Event& event : {open_event, connect_event}) {
        const std::string line = event_to_json(event, kOffset);
        EXPECT_NE(line.find(R"("errno":2147483648)"), std::string::npos) << line;
        EXPECT_NE(line.find(R"("error":"2147483648")"), std::string::npos) << line;
        auto parsed = event_from_json(line, "test:1");
        ASSERT_TRUE(parsed) << parsed.error().message << "\n" << line;
        EXPECT_EQ(event_to_json(parsed->event, kOffset), line);
    }
    EXPECT_EQ(errno_name(-ECONNREFUSED), "ECONNREFUSED");
    EXPECT_EQ(errno_name(-4000), "4000");
}

TEST(EventParse, HandWrittenEventsNeedOnlyTheDefiningFields) {
    auto open = event_from_json(
        R"({"type":"gpu_open","ts_ns":10,"process":{"pid":7,"comm":"t-rex"},"gpu_open":{"path":"/dev/nvidia0","fd":3,"device":"195:0"}})",
        "x");
    ASSERT_TRUE(open) << open.error().message;
    const auto& data = std::get<GpuOpen>(open->event.data);
    EXPECT_EQ(data.major, 195u);
    EXPECT_EQ(data.result, 3);
    EXPECT_EQ(open->event.task.tid, 7u);
    EXPECT_FALSE(open->time_unix_ns);

    auto connect = event_from_json(
        R"({"type":"connect","ts_ns":11,"process":{"pid":7},"connect":{"address":"127.0.0.1","port":3333}})",
        "x");
    ASSERT_TRUE(connect) << connect.error().message;
    EXPECT_TRUE(std::get<Connect>(connect->event.data).loopback);

    auto ioctl = event_from_json(
        R"({"type":"gpu_ioctl","ts_ns":12,"process":{"pid":7},"gpu_ioctl":{"major":195,"minor":255,"cmd":"0xc020462a"}})",
        "x");
    ASSERT_TRUE(ioctl) << ioctl.error().message;
    EXPECT_EQ(std::get<GpuIoctl>(ioctl->event.data).cmd, 0xc020462au);

    auto exit = event_from_json(
        R"({"type":"exit","ts_ns":13,"process":{"pid":7},"exit":{"signal":9}})", "x");
    ASSERT_TRUE(exit) << exit.error().message;
    EXPECT_EQ(std::get<Exit>(exit->event.data).signal(), 9);

    auto telemetry = event_from_json(
        R"({"type":"telemetry","ts_ns":14,"telemetry":{"gpu_index":0,"utilization_percent":99,"processes":[{"pid":7,"memory_bytes":1024}]}})",
        "x");
    ASSERT_TRUE(telemetry) << telemetry.error().message;
    EXPECT_EQ(std::get<Telemetry>(telemetry->event.data).processes.at(0).memory_bytes, 1024u);

    auto config = event_from_json(
        R"({"type":"config_file","ts_ns":15,"process":{"pid":7},"config_file":{"path":"/opt/x/config.json","lines":[{"line":9,"text":"\"url\": \"pool.supportxmr.com:3333\""}]}})",
        "x");
    ASSERT_TRUE(config) << config.error().message;
    const auto& file = std::get<ConfigFile>(config->event.data);
    EXPECT_EQ(file.reason, "default");
    EXPECT_FALSE(file.truncated);
    ASSERT_EQ(file.lines.size(), 1u);
    EXPECT_EQ(file.lines[0].line, 9u);
}

// Hand-written module loads give the kernel's taint letters; the agent's
// taint_bits, when present, are the exact mask.
TEST(EventParse, ModuleLoadTaintsFromLettersOrBits) {
    auto letters = event_from_json(
        R"({"type":"module_load","ts_ns":1,"process":{"pid":7},"module_load":{"name":"rk","taints":"POE"}})",
        "x");
    ASSERT_TRUE(letters) << letters.error().message;
    EXPECT_EQ(std::get<ModuleLoad>(letters->event.data).taints,
              (1u << 0) | (1u << 12) | (1u << 13));
    auto bits = event_from_json(
        R"({"type":"module_load","ts_ns":1,"process":{"pid":7},"module_load":{"name":"rk","taint_bits":2147483648}})",
        "x");
    ASSERT_TRUE(bits) << bits.error().message;
    EXPECT_EQ(std::get<ModuleLoad>(bits->event.data).taints, 1u << 31);
}

TEST(EventParse, ErrorsNameTheInputAndTheField) {
    struct Case {
        const char* line;
        const char* expected;
    } cases[] = {
        {R"(not json)", "f.jsonl:3: not valid JSON"},
        {R"([1,2])", "f.jsonl:3: expected a JSON object"},
        {R"({"ts_ns":1,"process":{"pid":1}})", "f.jsonl:3: type: missing"},
        {R"({"type":"exec","process":{"pid":1},"exec":{"filename":"/x"}})",
         "f.jsonl:3: ts_ns: missing"},
        {R"({"type":"bogus","ts_ns":1,"process":{"pid":1}})",
         "f.jsonl:3: type: unknown event type \"bogus\""},
        {R"({"type":"connect","ts_ns":1,"process":{"pid":1},"connect":{"address":"10.0.0.1","port":70000}})",
         "f.jsonl:3: connect.port: expected an integer 0..65535"},
        {R"({"type":"connect","ts_ns":1,"process":{"pid":1},"connect":{"address":"pool.example","port":1}})",
         "f.jsonl:3: connect.address: expected an IPv4 or IPv6 address"},
        {R"({"type":"connect","ts_ns":1,"process":{"pid":1},"connect":{"address":"10.0.0.1","port":1,"reasons":["watched"]}})",
         "f.jsonl:3: connect.reasons: unknown reason \"watched\" (gpu_holder, watched_port, "
         "connect_all, watched_process, watched_address, established)"},
        {R"({"type":"exec","ts_ns":1,"process":{"pid":"x"},"exec":{"filename":"/x"}})",
         "f.jsonl:3: process.pid: expected an integer"},
        {R"({"type":"exec","ts_ns":1,"process":{"pid":1},"exec":{"filename":"/x","argv":[1]}})",
         "f.jsonl:3: exec.argv: expected a list of strings"},
        {R"({"type":"gpu_open","ts_ns":1,"process":{"pid":1},"gpu_open":{"fd":3,"device":"195"}})",
         "f.jsonl:3: gpu_open.device: expected \"major:minor\""},
        {R"({"type":"exec","ts_ns":1,"time":"yesterday","process":{"pid":1},"exec":{"filename":"/x"}})",
         "f.jsonl:3: time: expected RFC 3339"},
        {R"({"type":"telemetry","ts_ns":1,"telemetry":{"gpu_index":0,"processes":[{"memory_bytes":1}]}})",
         "f.jsonl:3: telemetry.processes[0].pid: missing"},
        {R"({"v":2,"type":"exit","ts_ns":1,"process":{"pid":1}})",
         "f.jsonl:3: v: unsupported version 2"},
        {R"({"type":"gpu_open","ts_ns":1,"process":{"pid":1},"gpu_open":{"errno":2147483649}})",
         "f.jsonl:3: gpu_open.errno: expected an integer 0..2147483648"},
        {R"({"type":"config_file","ts_ns":1,"process":{"pid":1},"config_file":{"path":"/c","reason":"guess"}})",
         "f.jsonl:3: config_file.reason: expected \"argument\" or \"default\""},
        {R"({"type":"config_file","ts_ns":1,"process":{"pid":1},"config_file":{"path":"/c","lines":[{"text":"x"}]}})",
         "f.jsonl:3: config_file.lines[0].line: missing"},
        {R"({"type":"hidden_process","ts_ns":1,"process":{"pid":1},"hidden_process":{"seen_by":"ps"}})",
         "f.jsonl:3: hidden_process.seen_by: expected \"getdents64\" or \"process_table\""},
        {R"({"type":"hidden_process","ts_ns":1,"process":{"pid":1},"hidden_process":{"libraries":"/x.so"}})",
         "f.jsonl:3: hidden_process.libraries"},
        {R"({"type":"module_load","ts_ns":1,"process":{"pid":1},"module_load":{"name":"x","taints":"OZ"}})",
         "f.jsonl:3: module_load.taints: expected the kernel's taint letters"},
        {R"({"type":"module_load","ts_ns":1,"process":{"pid":1},"module_load":{"taints":"O"}})",
         "f.jsonl:3: module_load.name: missing"},
        {R"({"type":"file_change","ts_ns":1,"process":{"pid":1},"file_change":{"operation":"truncate","path":"/etc/crontab"}})",
         "f.jsonl:3: file_change.operation: expected \"write\", \"rename\" or \"unlink\""},
        {R"({"type":"file_change","ts_ns":1,"process":{"pid":1},"file_change":{"operation":"write","kind":"crontab","path":"/etc/crontab"}})",
         "f.jsonl:3: file_change.kind: unknown kind \"crontab\""},
        {R"({"type":"file_change","ts_ns":1,"process":{"pid":1},"file_change":{"operation":"write"}})",
         "f.jsonl:3: file_change.path: missing"},
    };
    for (const auto& c : cases) {
        auto parsed = event_from_json(c.line, "f.jsonl:3");
        ASSERT_FALSE(parsed) << c.line;
        EXPECT_EQ(parsed.error().code, ErrorCode::kParse);
        EXPECT_TRUE(parsed.error().message.starts_with(c.expected))
            << "got: " << parsed.error().message << "\nwant: " << c.expected;
    }
}

// Lines the fast parser hands to the exact one read as that one reads them:
// duplicate keys (the last wins), numbers out of range of either parser,
// escapes, a reader reused across good and bad lines.
TEST(EventParse, EveryLineReadsAsTheExactParserReadsIt) {
    EventJsonReader reader;
    auto twice = reader.parse(
        R"({"type":"fork","ts_ns":1,"ts_ns":2,"process":{"pid":1,"comm":"a","comm":"b"},"fork":{"child_pid":3,"child_pid":4,"child_pie":5}})",
        "x");
    ASSERT_TRUE(twice) << twice.error().message;
    EXPECT_EQ(twice->event.ts_ns, 2u);
    EXPECT_EQ(twice->event.task.comm, "b");
    // Keys of one length that differ only in their last byte.
    EXPECT_EQ(std::get<Fork>(twice->event.data).child_pid, 4u);
    EXPECT_EQ(reader.exact_parses(), 0u) << "duplicate keys are read by the fast path too";

    auto escaped = reader.parse(
        R"({"type":"exec","ts_ns":-0,"process":{"pid":1,"comm":"caf\u00e9"},"exec":{"filename":"/x\ty","argv":["\ud83d\ude00"]}})",
        "x");
    ASSERT_TRUE(escaped) << escaped.error().message;
    EXPECT_EQ(escaped->event.task.comm, "caf\xc3\xa9");
    EXPECT_EQ(std::get<Exec>(escaped->event.data).filename, "/x\ty");
    EXPECT_EQ(std::get<Exec>(escaped->event.data).argv.at(0), "\xf0\x9f\x98\x80");

    auto huge = reader.parse(R"({"type":"exit","ts_ns":18446744073709551616,"process":{"pid":1}})",
                             "f.jsonl:9");
    ASSERT_FALSE(huge);
    EXPECT_EQ(huge.error().message,
              "f.jsonl:9: ts_ns: expected an integer 0..18446744073709551615, got number");

    auto fine =
        reader.parse(R"({"type":"exit","ts_ns":18446744073709551615,"process":{"pid":1}})", "x");
    ASSERT_TRUE(fine) << fine.error().message;
    EXPECT_EQ(fine->event.ts_ns, 18446744073709551615u);
}

// The members every line has (v, type, ts_ns, time, process and the
// process's) are read in one pass, the payload by lookup: the last of a
// repeated name wins and null is absent in both, the payload may come before
// the type, and a missing or wrong process is reported as before, by the fast
// path and the exact one alike.
TEST(EventParse, TheLinesHeadReadsInOnePassAsByLookup) {
    EventJsonReader reader;
    auto repeated = reader.parse(
        R"({"exec":{"filename":"/a"},"process":{"pid":1,"tid":9,"tid":null,"comm":"a","comm":"b","cgroup_id":3,"cgroup_id":null,"uid":5},"v":null,"time":"2026-09-21T14:30:00Z","time":null,"ts_ns":7,"type":"exit","type":"exec","exec":{"filename":"/b"},"process":{"pid":2,"ppid":4,"comm":"c"}})",
        "x");
    ASSERT_TRUE(repeated) << repeated.error().message;
    EXPECT_EQ(reader.exact_parses(), 0u);
    const Event& event = repeated->event;
    EXPECT_EQ(event.ts_ns, 7u);
    EXPECT_FALSE(repeated->time_unix_ns) << "a null time after a good one is absent";
    EXPECT_EQ(event.task.pid, 2u) << "the last process object, not a blend of both";
    EXPECT_EQ(event.task.tid, 2u);
    EXPECT_EQ(event.task.ppid, 4u);
    EXPECT_EQ(event.task.uid, 0u);
    EXPECT_EQ(event.task.comm, "c");
    EXPECT_EQ(event.task.cgroup_id, 0u);
    EXPECT_EQ(std::get<Exec>(event.data).filename, "/b");

    auto nulls = reader.parse(
        R"({"type":"fork","ts_ns":1,"process":{"pid":6,"tid":8,"comm":"a","comm":null,"ppid":3,"ppid":null},"fork":{"child_pid":7}})",
        "x");
    ASSERT_TRUE(nulls) << nulls.error().message;
    EXPECT_EQ(nulls->event.task.tid, 8u);
    EXPECT_EQ(nulls->event.task.comm, "");
    EXPECT_EQ(nulls->event.task.ppid, 0u);

    // Telemetry needs no process; any other type does.
    auto telemetry = reader.parse(
        R"({"type":"telemetry","ts_ns":1,"process":null,"telemetry":{"gpu_index":2}})", "x");
    ASSERT_TRUE(telemetry) << telemetry.error().message;
    EXPECT_EQ(telemetry->event.task.pid, 0u);
    EXPECT_EQ(reader.exact_parses(), 0u);

    struct Case {
        const char* line;
        const char* expected;
    } cases[] = {
        {R"({"type":"exit","ts_ns":1,"process":{"pid":1},"process":null})",
         "f:1: process: missing"},
        {R"({"type":"exit","ts_ns":1,"process":[1]})",
         "f:1: process: expected an object, got array"},
        {R"({"type":"exit","ts_ns":1,"process":{"pid":1,"pid":null}})",
         "f:1: process.pid: missing"},
        {R"({"type":"exit","ts_ns":1,"process":{"pid":1,"comm":7}})",
         "f:1: process.comm: expected a string, got number"},
        {R"({"type":"exec","ts_ns":1,"process":{"pid":1},"exec":{"filename":"/x"},"exec":null})",
         "f:1: exec: missing"},
        {R"({"type":"exit","ts_ns":1,"v":1,"v":true,"process":{"pid":1}})",
         "f:1: v: expected an integer"},
        {R"({"type":"exit","type":7,"ts_ns":1,"process":{"pid":1}})",
         "f:1: type: expected a string, got number"},
    };
    for (const auto& c : cases) {
        const uint64_t exact_before = reader.exact_parses();
        auto parsed = reader.parse(c.line, "f:1");
        ASSERT_FALSE(parsed) << c.line;
        EXPECT_EQ(reader.exact_parses(), exact_before + 1) << "errors are the exact parser's";
        EXPECT_TRUE(parsed.error().message.starts_with(c.expected))
            << "got: " << parsed.error().message << "\nwant: " << c.expected;
    }
}

TEST(EventParse, Rfc3339) {
    EXPECT_EQ(parse_rfc3339("1970-01-01T00:00:00Z"), 0);
    EXPECT_EQ(parse_rfc3339("1970-01-01T00:00:01.5Z"), 1'500'000'000);
    EXPECT_EQ(parse_rfc3339("1970-01-01T01:00:00+01:00"), 0);
    EXPECT_EQ(parse_rfc3339("2026-11-21T23:49:29.227805351Z"), 1'795'304'969'227'805'351);
    EXPECT_FALSE(parse_rfc3339("2026-11-21 23:49"));
    EXPECT_FALSE(parse_rfc3339("2026-13-21T23:49:29Z"));
    // Out-of-range days and leap seconds roll over as timegm() rolls them.
    EXPECT_EQ(parse_rfc3339("2026-02-31T00:00:00Z"), parse_rfc3339("2026-03-03T00:00:00Z"));
    EXPECT_EQ(parse_rfc3339("2016-12-31T23:59:60Z"), parse_rfc3339("2017-01-01T00:00:00Z"));
    EXPECT_EQ(parse_rfc3339("1969-12-31T23:59:59Z"), -1'000'000'000);
    EXPECT_EQ(parse_rfc3339("2000-02-29T00:00:00-01:30"), 951'787'800'000'000'000);
    EXPECT_EQ(format_rfc3339(1'795'304'969'227'805'351), "2026-11-21T23:49:29.227805351Z");
}

// A reader of many lines remembers the last date and time to the second:
// what follows them, and a different second, are still read in full.
TEST(EventParse, Rfc3339WithTheLastSecondsRemembered) {
    const char* const times[] = {
        "2026-11-21T23:49:29.227805351Z",
        "2026-11-21T23:49:29.5Z",
        "2026-11-21T23:49:29Z",
        "2026-11-21T23:49:29+01:00",
        "2026-11-21T23:49:29.Z",
        "2026-11-21T23:49:29.1Zjunk",
        "2026-11-21T23:49:29",
        "2026-11-21T23:49:30.000000001Z",
        "2026-13-21T23:49:29Z",
        "2026-11-21T23:49:30.25-00:30",
        "2026-11-21T23:49:3x.25Z",
        "1970-01-01T00:00:00Z",
    };
    Rfc3339Seconds last;
    for (const char* text : times) {
        EXPECT_EQ(parse_rfc3339(text, &last), parse_rfc3339(text)) << text;
    }
    // An invalid prefix is never remembered as a valid one.
    EXPECT_FALSE(parse_rfc3339("2026-13-21T23:49:29Z", &last));
    EXPECT_FALSE(parse_rfc3339("2026-13-21T23:49:29Z", &last));
    EXPECT_EQ(parse_rfc3339("1970-01-01T00:00:00.5Z", &last), 500'000'000);
}

}  // namespace
}  // namespace gpuguard::agent
