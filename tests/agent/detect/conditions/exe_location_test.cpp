// exe_location (agent/detect/conditions/exe_location.cpp): where the
// executable lives — a temporary directory, a deleted file, a memfd, ... —
// read from its path with the spelling undone (rules::exe_locations); the
// rule holds when it lists any of the executable's locations, with the
// executable as evidence.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class ExeLocationTest : public ConditionTest {
  protected:
    // Whether `rule` holds for a process that ran `exe`.
    bool ran(const rules::CorrelationRule& rule, const std::string& exe) {
        exec(kPid, exe);
        return holds(rule, "exe_location", kPid, 5 * kSecond);
    }
    // A process the kernel ran from a memfd through its fd path.
    void exec_memfd(uint32_t pid) {
        apply(kSecond, pid, "3",
              Exec{"/proc/self/fd/3", {"3"}, false, false, pid, "/memfd:payload (deleted)"});
    }

    // What the agent's scan of the executable found of its location (the
    // correlator copies ExeScan::location_check into the evidence).
    void scan(uint32_t pid, const std::string& location_check) {
        evidence(pid).location_check = location_check;
    }

    static constexpr uint32_t kPid = 500;
    const rules::CorrelationRule temporary_ = rule_when("{exe_location: [tmp, dev_shm]}");
};

TEST_F(ExeLocationTest, an_executable_in_a_listed_place_holds_with_the_executable_as_evidence) {
    ASSERT_TRUE(ran(temporary_, "/tmp/.x/kworker"));
    EXPECT_EQ(details(), std::vector<std::string>{"executable /tmp/.x/kworker"});
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, 5 * kSecond);  // now: the executable is where it is
    EXPECT_EQ(in_.extra[0].kind, "event");
    EXPECT_EQ(in_.extra[0].event_type, "exec");
    EXPECT_EQ(in_.extra[0].field, "process");
    EXPECT_TRUE(in_.locations_known);
    EXPECT_EQ(in_.locations, std::vector<rules::ExeLocation>{rules::ExeLocation::kTmp});

    ASSERT_TRUE(ran(temporary_, "/dev/shm/miner"));
    EXPECT_EQ(details(), std::vector<std::string>{"executable /dev/shm/miner"});

    // The spelling undone; the evidence names the path as written.
    ASSERT_TRUE(ran(temporary_, "/usr/../tmp//x"));
    EXPECT_EQ(details(), std::vector<std::string>{"executable /usr/../tmp//x"});
    EXPECT_TRUE(ran(temporary_, "/proc/self/root/dev/shm/./x"));
}

TEST_F(ExeLocationTest, a_place_beside_a_listed_one_does_not_hold) {
    EXPECT_FALSE(ran(temporary_, "/usr/bin/python3"));
    EXPECT_TRUE(in_.extra.empty());
    EXPECT_FALSE(ran(temporary_, "/var/tmp/miner"));  // var_tmp, not listed
    EXPECT_FALSE(ran(temporary_, "/tmpfs/miner"));    // not below /tmp
    EXPECT_FALSE(ran(temporary_, "/dev/shmem/miner"));
    EXPECT_FALSE(ran(temporary_, "/tmp/../usr/bin/python3"));  // /usr/bin, spelt via /tmp
    EXPECT_TRUE(in_.extra.empty());
    EXPECT_TRUE(ran(rule_when("{exe_location: [var_tmp]}"), "/var/tmp/miner"));
}

TEST_F(ExeLocationTest, deleted_and_memfd_executables_hold_only_their_own_locations) {
    const auto deleted = rule_when("{exe_location: [deleted]}");
    ASSERT_TRUE(ran(deleted, "/usr/local/bin/miner (deleted)"));
    EXPECT_EQ(details(), std::vector<std::string>{"executable /usr/local/bin/miner (deleted)"});
    EXPECT_FALSE(ran(deleted, "/usr/local/bin/miner"));
    EXPECT_FALSE(ran(deleted, "/usr/local/bin/miner (deleted"));

    const auto memfd = rule_when("{exe_location: [memfd]}");
    exec_memfd(kPid + 1);
    ASSERT_TRUE(holds(memfd, "exe_location", kPid + 1, 5 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"executable /memfd:payload (deleted)"});
    // A memfd is its own location, not a deleted file nor a temporary one.
    EXPECT_FALSE(holds(deleted, "exe_location", kPid + 1, 5 * kSecond));
    EXPECT_FALSE(holds(temporary_, "exe_location", kPid + 1, 5 * kSecond));
    EXPECT_FALSE(ran(memfd, "/tmp/memfd:payload"));
}

TEST_F(ExeLocationTest, a_look_alike_counts_as_temporary_only_once_its_claim_is_refused) {
    const auto look_alikes = rule_when("{exe_location: [appimage, extracted_runtime]}");
    const std::string exe = "/tmp/_MEI77/ffmpeg";
    // Before the scan, and with the claim verified: what the name claims.
    EXPECT_FALSE(ran(temporary_, exe));
    EXPECT_TRUE(ran(look_alikes, exe));
    scan(kPid, "verified: PyInstaller: /opt/app/app (pid 499) uses files from /tmp/_MEI77");
    EXPECT_FALSE(holds(temporary_, "exe_location", kPid, 6 * kSecond));
    EXPECT_TRUE(holds(look_alikes, "exe_location", kPid, 6 * kSecond));
    // Refused: a temporary location, the refusal in the evidence.
    const std::string refused =
        "refused: PyInstaller: no ancestor outside a temporary directory uses files from "
        "/tmp/_MEI77";
    scan(kPid, refused);
    ASSERT_TRUE(holds(temporary_, "exe_location", kPid, 6 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"executable " + exe + " (" + refused + ")"});
    EXPECT_FALSE(holds(look_alikes, "exe_location", kPid, 6 * kSecond));
}

TEST_F(ExeLocationTest, does_not_depend_on_time) {
    EXPECT_FALSE(ran(temporary_, "/usr/bin/python3"));
    EXPECT_FALSE(find("exe_location")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
