// persistence_after_detection (agent/detect/conditions/
// persistence_after_detection.cpp): another rule flagged the process, and it,
// an ancestor or a descendant wrote persistence (cron, systemd, shell_rc,
// ssh_keys) after that or within the look-back before it. Every rule carries
// the condition: where the rule does not set it, it always holds and a
// flagged process's persistence is evidence of the rule's detections, not of
// supporting signals.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class PersistenceAfterDetectionTest : public ConditionTest {
  protected:
    const rules::CorrelationRule required_ = rule_when("{persistence_after_detection: true}");
    const rules::CorrelationRule unset_ = rule_when("{opaque_peer: true}");
    static constexpr std::string_view kName = "persistence_after_detection";
    static constexpr uint32_t kMiner = 100;
    static constexpr uint32_t kShell = 101;  // the miner's child

    static PersistenceWrite write_of(uint64_t ts_ns, const std::string& operation,
                                     const std::string& kind, const std::string& path) {
        return PersistenceWrite{ts_ns, kShell, "sh", operation, kind, path, {kShell, kMiner}};
    }
    // A process whose parent is `ppid`, by its exec.
    void exec_child(uint32_t pid, uint32_t ppid, const std::string& exe) {
        const std::string comm = exe.substr(exe.rfind('/') + 1);
        Event event;
        event.ts_ns = kSecond;
        event.task = TaskInfo{pid, pid, ppid, 1000, 1000, 1, comm};
        event.data = Exec{exe, {comm}, false, false, pid};
        table_.apply(event);
    }
    // The process wrote `path` (a watched file of `kind`), recorded as the
    // correlator does: the writer's own change first, then the persistence
    // the book gives to the flagged processes it belongs to (their pids).
    std::vector<uint32_t> wrote(uint64_t ts_ns, uint32_t pid, const std::string& kind,
                                const std::string& path) {
        FileChange change;
        change.operation = "write";
        change.syscall = "openat";
        change.kind = kind;
        change.path = path;
        const ProcessInfo* info = table_.find(pid);
        Event event;
        event.ts_ns = ts_ns;
        event.task =
            TaskInfo{pid, pid, info ? info->ppid : 1, 1000, 1000, 1, info ? info->comm : ""};
        event.data = change;
        EXPECT_TRUE(book_.record_file_change(event, change));
        return book_.record_persistence(event, change);
    }
};

TEST_F(PersistenceAfterDetectionTest, set_it_needs_the_flag_and_persistence_each_write_evidence) {
    exec(kMiner, "/tmp/.x/xmrig");
    evidence(kMiner).persistence.push_back(
        write_of(20 * kSecond, "write", "cron", "/etc/cron.d/x"));
    EXPECT_FALSE(holds(required_, kName, kMiner, 30 * kSecond));  // not flagged
    EXPECT_TRUE(in_.extra.empty());
    evidence(kMiner).flagged = true;
    evidence(kMiner).persistence.clear();
    EXPECT_FALSE(holds(required_, kName, kMiner, 30 * kSecond));  // flagged, nothing written
    EXPECT_TRUE(in_.extra.empty());

    evidence(kMiner).persistence.push_back(
        write_of(20 * kSecond, "write", "cron", "/etc/cron.d/x"));
    evidence(kMiner).persistence.push_back(
        write_of(25 * kSecond, "rename", "systemd", "/etc/systemd/system/x.service"));
    ASSERT_TRUE(holds(required_, kName, kMiner, 30 * kSecond));
    ASSERT_EQ(in_.extra.size(), 2u);
    EXPECT_EQ(in_.extra[0].ts_ns, 20 * kSecond);
    EXPECT_EQ(in_.extra[0].kind, "persistence");
    EXPECT_EQ(in_.extra[0].event_type, "file_change");
    EXPECT_EQ(in_.extra[0].field, "cron");
    EXPECT_EQ(in_.extra[1].ts_ns, 25 * kSecond);
    EXPECT_EQ(in_.extra[1].field, "systemd");
    EXPECT_EQ(details(), (std::vector<std::string>{
                             "wrote /etc/cron.d/x by pid 101 (sh)",
                             "renamed onto /etc/systemd/system/x.service by pid 101 (sh)"}));
    EXPECT_FALSE(find(kName)->time_dependent());
}

TEST_F(PersistenceAfterDetectionTest, unset_it_holds_and_adds_persistence_to_rules_not_signals) {
    exec(kMiner, "/tmp/.x/xmrig");
    ASSERT_TRUE(holds(unset_, kName, kMiner, 30 * kSecond));  // nothing flagged or written
    EXPECT_TRUE(in_.extra.empty());
    evidence(kMiner).flagged = true;
    evidence(kMiner).persistence.push_back(
        write_of(20 * kSecond, "write", "ssh_keys", "/root/.ssh/authorized_keys"));
    ASSERT_TRUE(holds(unset_, kName, kMiner, 30 * kSecond, 0));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].field, "ssh_keys");
    EXPECT_EQ(details(),
              std::vector<std::string>{"wrote /root/.ssh/authorized_keys by pid 101 (sh)"});
    ASSERT_TRUE(holds(unset_, kName, kMiner, 30 * kSecond, kSupportingSignal));
    EXPECT_TRUE(in_.extra.empty());
    // Set, a supporting signal still needs it and still gets it.
    ASSERT_TRUE(holds(required_, kName, kMiner, 30 * kSecond, kSupportingSignal));
    EXPECT_EQ(in_.extra.size(), 1u);
}

TEST_F(PersistenceAfterDetectionTest, the_book_gives_a_write_to_its_flagged_kin_only) {
    exec(kMiner, "/tmp/.x/xmrig");
    exec_child(kShell, kMiner, "/bin/sh");
    exec(300, "/usr/bin/other");
    evidence(kMiner).flagged = true;
    evidence(300).flagged = true;  // flagged, but no kin of the writer
    EXPECT_EQ(wrote(20 * kSecond, kShell, "cron", "/etc/cron.d/x"), std::vector<uint32_t>{kMiner});
    ASSERT_TRUE(holds(required_, kName, kMiner, 30 * kSecond));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, 20 * kSecond);
    EXPECT_EQ(details(), std::vector<std::string>{"wrote /etc/cron.d/x by pid 101 (sh)"});
    EXPECT_FALSE(holds(required_, kName, 300, 30 * kSecond));
    EXPECT_FALSE(holds(required_, kName, kShell, 30 * kSecond));  // the writer: not flagged
}

TEST_F(PersistenceAfterDetectionTest, a_write_just_before_the_flag_counts_within_the_look_back) {
    exec(kMiner, "/tmp/.x/xmrig");
    exec_child(kShell, kMiner, "/bin/sh");
    EXPECT_TRUE(wrote(20 * kSecond, kShell, "shell_rc", "/root/.bashrc").empty());  // none flagged
    evidence(kMiner).flagged = true;
    const uint64_t look_back = EvidenceBookOptions{}.persistence_lookback_ns;
    EXPECT_FALSE(book_.attribute_recent_persistence(kMiner, 20 * kSecond + look_back + 1));
    EXPECT_FALSE(holds(required_, kName, kMiner, 20 * kSecond + look_back + 1));
    ASSERT_TRUE(book_.attribute_recent_persistence(kMiner, 20 * kSecond + look_back));
    ASSERT_TRUE(holds(required_, kName, kMiner, 20 * kSecond + look_back));
    EXPECT_EQ(details(), std::vector<std::string>{"wrote /root/.bashrc by pid 101 (sh)"});
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
