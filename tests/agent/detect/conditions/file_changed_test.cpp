// file_changed (agent/detect/conditions/file_changed.cpp): the process wrote
// or renamed onto a watched file of one of the kinds listed (file_change
// events) within the rule's window; each change is a piece of evidence, an
// unlink none.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class FileChangedTest : public ConditionTest {
  protected:
    const rules::CorrelationRule rule_ = rule_when("{file_changed: [cron, systemd]}", "window: 5m");
    static constexpr uint32_t kPid = 100;

    // A file_change event of the process, recorded in the book.
    void record_change(uint64_t ts_ns, const std::string& operation, const std::string& kind,
                       const std::string& path, std::vector<std::string> libraries = {}) {
        FileChange file_change;
        file_change.operation = operation;
        file_change.syscall = operation == "write"    ? "openat"
                              : operation == "rename" ? "rename"
                                                      : "unlink";
        file_change.kind = kind;
        file_change.path = path;
        file_change.libraries = std::move(libraries);
        Event event;
        event.ts_ns = ts_ns;
        event.task = TaskInfo{kPid, kPid, 1, 1000, 1000, 1, "worker"};
        event.data = file_change;
        book_.record_file_change(event, file_change);
    }
};

TEST_F(FileChangedTest, each_write_or_rename_of_a_listed_kind_is_a_piece_of_evidence) {
    exec(kPid, "/usr/bin/worker");
    record_change(10 * kSecond, "write", "cron", "/etc/cron.d/x");
    record_change(12 * kSecond, "rename", "systemd", "/etc/systemd/system/x.service");
    ASSERT_TRUE(holds(rule_, "file_changed", kPid, 20 * kSecond));
    ASSERT_EQ(in_.extra.size(), 2u);
    EXPECT_EQ(in_.extra[0].ts_ns, 10 * kSecond);
    EXPECT_EQ(in_.extra[0].kind, "event");
    EXPECT_EQ(in_.extra[0].event_type, "file_change");
    EXPECT_EQ(in_.extra[0].field, "cron");
    EXPECT_EQ(in_.extra[1].ts_ns, 12 * kSecond);
    EXPECT_EQ(in_.extra[1].field, "systemd");
    EXPECT_EQ(details(), (std::vector<std::string>{"wrote /etc/cron.d/x",
                                                   "renamed onto /etc/systemd/system/x.service"}));
}

TEST_F(FileChangedTest, an_unlink_or_a_kind_not_listed_does_not_hold) {
    exec(kPid, "/usr/bin/worker");
    record_change(10 * kSecond, "unlink", "cron", "/etc/cron.d/x");
    record_change(11 * kSecond, "write", "shell_rc", "/home/u/.bashrc");
    record_change(12 * kSecond, "write", "", "/tmp/out.log");  // a watched process's, no kind
    EXPECT_FALSE(holds(rule_, "file_changed", kPid, 20 * kSecond));
    EXPECT_TRUE(in_.extra.empty());
    ASSERT_TRUE(holds(rule_when("{file_changed: [shell_rc]}"), "file_changed", kPid, 20 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"wrote /home/u/.bashrc"});
}

TEST_F(FileChangedTest, a_change_older_than_the_rules_window_does_not_count) {
    exec(kPid, "/usr/bin/worker");
    record_change(10 * kSecond, "write", "cron", "/etc/cron.d/old");
    record_change(100 * kSecond, "write", "cron", "/etc/cron.d/new");
    ASSERT_TRUE(holds(rule_, "file_changed", kPid, (10 + 300) * kSecond));  // 5m: both
    EXPECT_EQ(in_.extra.size(), 2u);
    ASSERT_TRUE(holds(rule_, "file_changed", kPid, (10 + 300) * kSecond + 1));
    EXPECT_EQ(details(), std::vector<std::string>{"wrote /etc/cron.d/new"});
    EXPECT_FALSE(holds(rule_, "file_changed", kPid, (100 + 300) * kSecond + 1));
    EXPECT_FALSE(find("file_changed")->time_dependent());
}

TEST_F(FileChangedTest, a_preload_change_names_the_libraries_the_file_names) {
    exec(kPid, "/usr/bin/worker");
    evidence(kPid).files.push_back(FileRecord{10 * kSecond,
                                              "write",
                                              "preload",
                                              "/etc/ld.so.preload",
                                              {"/tmp/.x/libhide.so", "/usr/lib/libgpu.so"}});
    ASSERT_TRUE(holds(rule_when("{file_changed: [preload]}"), "file_changed", kPid, 20 * kSecond));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].field, "preload");
    EXPECT_EQ(details(), std::vector<std::string>{"wrote /etc/ld.so.preload (libraries: "
                                                  "/tmp/.x/libhide.so, /usr/lib/libgpu.so)"});
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
