// The enforcer's user-space actions on children the test forks: graceful and
// forced kills through a pidfd, recycled pids, pause/resume, and every
// safety refusal. No BPF, no network: the nftables and kernel paths are in
// tests/bpf.
#include "gpuguard/enforce/enforcer.h"

#include <chrono>
#include <csignal>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuguard/state/process_handle.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using namespace std::chrono_literals;

// A forked child that is ready (handlers installed) when the constructor returns.
class Child {
  public:
    enum class Kind { kExitsOnTerm, kIgnoresTerm, kSleepExec };

    explicit Child(Kind kind, bool own_group = false) {
        int ready[2];
        EXPECT_EQ(pipe(ready), 0);
        pid_ = fork();
        if (pid_ == 0) {
            close(ready[0]);
            if (own_group) setpgid(0, 0);
            if (kind == Kind::kIgnoresTerm) signal(SIGTERM, SIG_IGN);
            if (kind == Kind::kSleepExec) {
                fcntl(ready[1], F_SETFD, FD_CLOEXEC);  // EOF at exec says "ready"
                execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
                _exit(127);
            }
            const char byte = 1;
            (void)!write(ready[1], &byte, 1);
            for (;;) pause();
        }
        close(ready[1]);
        char byte = 0;
        // For exec children, EOF (the CLOEXEC end closing at exec) is "ready".
        (void)!read(ready[0], &byte, 1);
        close(ready[0]);
        if (kind == Kind::kSleepExec) {
            for (int i = 0; i < 200; ++i) {
                auto stat = read_proc_stat(static_cast<uint32_t>(pid_));
                if (stat && stat->comm == "sleep") break;
                std::this_thread::sleep_for(5ms);
            }
        }
    }
    ~Child() {
        if (!reaped_) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }

    pid_t pid() const { return pid_; }
    DetectionProcess target() const {
        DetectionProcess process;
        process.pid = static_cast<uint32_t>(pid_);
        auto stat = read_proc_stat(process.pid);
        if (stat) process.start_time_ns = stat->start_time_ns;
        return process;
    }
    // Wait status after the enforcer acted (reaps).
    int reap() {
        int status = 0;
        EXPECT_EQ(waitpid(pid_, &status, 0), pid_);
        reaped_ = true;
        return status;
    }
    bool alive() const {
        siginfo_t info{};
        return waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
               info.si_pid == 0;
    }

  private:
    pid_t pid_ = -1;
    bool reaped_ = false;
};

EnforcementConfig quick_config() {
    EnforcementConfig config;
    config.grace_period_ms = 300;
    config.max_actions_per_minute = 0;
    return config;
}

TEST(ProcStat, parses_comm_with_spaces_and_parentheses) {
    std::string line = "42 (a) b (c)) S 7 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0";
    auto stat = parse_proc_stat(line);
    ASSERT_TRUE(stat.ok()) << stat.error().message;
    EXPECT_EQ(stat->pid, 42u);
    EXPECT_EQ(stat->comm, "a) b (c)");
    EXPECT_EQ(stat->state, 'S');
    EXPECT_EQ(stat->ppid, 7u);
    EXPECT_EQ(stat->flags, 4194560u);
    EXPECT_EQ(stat->start_time_ticks, 12345u);
    EXPECT_FALSE(stat->kernel_thread());
    EXPECT_FALSE(parse_proc_stat("garbage").ok());
}

TEST(ProcStat, kthreadd_is_a_kernel_thread) {
    auto stat = read_proc_stat(2);
    ASSERT_TRUE(stat.ok());
    EXPECT_TRUE(stat->kernel_thread());
    EXPECT_TRUE(stat->flags & kPfKthread);
}

TEST(EnforcerKill, a_child_ignoring_sigterm_is_sigkilled_after_the_grace_period) {
    Child child(Child::Kind::kIgnoresTerm);
    Enforcer enforcer(quick_config());
    const auto start = std::chrono::steady_clock::now();
    const auto outcome = enforcer.kill(child.target(), KillOptions{});
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(outcome.outcome, "success") << outcome.reason;
    EXPECT_EQ(outcome.action, "kill");
    EXPECT_EQ(outcome.reason, "SIGKILL after 300 ms");
    EXPECT_GE(took, 300ms);
    const int status = child.reap();
    ASSERT_TRUE(WIFSIGNALED(status));
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST(EnforcerKill, a_child_that_exits_on_sigterm_is_not_sigkilled) {
    Child child(Child::Kind::kExitsOnTerm);
    EnforcementConfig config = quick_config();
    config.grace_period_ms = 5000;
    Enforcer enforcer(config);
    const auto start = std::chrono::steady_clock::now();
    const auto outcome = enforcer.kill(child.target(), KillOptions{});
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << "no need to wait the grace period";
    EXPECT_EQ(outcome.outcome, "success") << outcome.reason;
    EXPECT_EQ(outcome.reason, "exited on SIGTERM");
    const int status = child.reap();
    ASSERT_TRUE(WIFSIGNALED(status));
    EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(EnforcerKill, force_sends_sigkill_at_once) {
    Child child(Child::Kind::kExitsOnTerm);
    Enforcer enforcer(quick_config());
    KillOptions options;
    options.force = true;
    const auto outcome = enforcer.kill(child.target(), options);
    EXPECT_EQ(outcome.outcome, "success");
    EXPECT_EQ(outcome.reason, "SIGKILL");
    EXPECT_EQ(WTERMSIG(child.reap()), SIGKILL);
}

TEST(EnforcerKill, a_recycled_pid_is_not_signalled) {
    Child child(Child::Kind::kExitsOnTerm);
    Enforcer enforcer(quick_config());
    DetectionProcess stale = child.target();
    ASSERT_NE(stale.start_time_ns, 0u);
    stale.start_time_ns += 1'000'000'000;  // the process the detection named started earlier
    const auto outcome = enforcer.kill(stale, KillOptions{});
    EXPECT_EQ(outcome.outcome, "withheld");
    EXPECT_NE(outcome.reason.find("now belongs to another process"), std::string::npos)
        << outcome.reason;
    std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(child.alive()) << "the process now holding the pid must not be touched";
}

TEST(EnforcerKill, an_exited_process_is_already_exited_not_a_failure) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    waitpid(pid, nullptr, 0);
    Enforcer enforcer(quick_config());
    DetectionProcess gone;
    gone.pid = static_cast<uint32_t>(pid);
    const auto outcome = enforcer.kill(gone, KillOptions{});
    EXPECT_EQ(outcome.outcome, "already_exited") << outcome.reason;
    EXPECT_TRUE(outcome.linked_detection_id.empty()) << "no kill of ours ended it";
}

// Two detections of one process (a miner without a GPU at exec, then on its
// GPU): the second kill finds it ended by the first and says so.
TEST(EnforcerKill, a_process_another_detection_killed_is_already_exited_linked_to_it) {
    Child child(Child::Kind::kExitsOnTerm);
    Enforcer enforcer(quick_config());
    Detection first;
    first.id = "d-first";
    first.rule_id = "GG-CORR-0012";
    Detection second;
    second.id = "d-second";
    second.rule_id = "GG-CORR-0001";
    KillOptions options;
    options.force = true;
    EXPECT_EQ(enforcer.kill(child.target(), options, first).outcome, "success");
    const auto outcome = enforcer.kill(child.target(), options, second);
    EXPECT_EQ(outcome.outcome, "already_exited") << outcome.reason;
    EXPECT_EQ(outcome.detection_id, "d-second");
    EXPECT_EQ(outcome.linked_detection_id, "d-first");
    EXPECT_EQ(outcome.reason, "ended by the kill of detection d-first");
    EXPECT_EQ(WTERMSIG(child.reap()), SIGKILL);
    // Reaped: the pid alone (no start time) still finds the kill that ended it.
    DetectionProcess by_pid;
    by_pid.pid = child.target().pid;
    EXPECT_EQ(enforcer.kill(by_pid, options, second).linked_detection_id, "d-first");
}

TEST(EnforcerKill, process_group_scope_takes_the_whole_group) {
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    const pid_t leader = fork();
    if (leader == 0) {
        setpgid(0, 0);
        const pid_t member = fork();
        if (member == 0) {
            for (;;) pause();
        }
        (void)!write(pipe_fds[1], &member, sizeof(member));
        for (;;) pause();
    }
    pid_t member = 0;
    ASSERT_EQ(read(pipe_fds[0], &member, sizeof(member)), static_cast<ssize_t>(sizeof(member)));
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    auto member_handle = ProcessHandle::open(static_cast<uint32_t>(member), 0);
    ASSERT_TRUE(member_handle.ok());

    Enforcer enforcer(quick_config());
    KillOptions options;
    options.scope = KillScope::kProcessGroup;
    DetectionProcess target;
    target.pid = static_cast<uint32_t>(leader);
    const auto outcome = enforcer.kill(target, options);
    EXPECT_EQ(outcome.outcome, "success") << outcome.reason;
    EXPECT_TRUE(member_handle->wait_exit(2s)) << "the group member died too";
    int status = 0;
    waitpid(leader, &status, 0);
    EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(EnforcerSafety, never_pid_1_kernel_threads_the_agent_or_its_parents) {
    Enforcer enforcer(quick_config());
    for (uint32_t pid :
         {1u, 2u, static_cast<uint32_t>(getpid()), static_cast<uint32_t>(getppid())}) {
        DetectionProcess target;
        target.pid = pid;
        const auto outcome = enforcer.kill(target, KillOptions{});
        EXPECT_EQ(outcome.outcome, "withheld") << "pid " << pid;
        EXPECT_FALSE(outcome.reason.empty());
    }
    EXPECT_NE(enforcer.protected_reason(1).find("pid 1"), std::string::npos);
    EXPECT_NE(enforcer.protected_reason(2).find("kernel thread"), std::string::npos);
    EXPECT_NE(enforcer.protected_reason(getpid()).find("agent itself"), std::string::npos);
    EXPECT_NE(enforcer.protected_reason(getppid()).find("ancestor"), std::string::npos);
}

TEST(EnforcerSafety, allowlisted_executables_users_and_cgroups_are_withheld) {
    Child sleeper(Child::Kind::kSleepExec);
    {
        EnforcementConfig config = quick_config();
        config.allowlist.executables = {"/usr/bin/sl*"};
        Enforcer enforcer(config);
        const auto outcome = enforcer.kill(sleeper.target(), KillOptions{});
        EXPECT_EQ(outcome.outcome, "withheld");
        EXPECT_NE(outcome.reason.find("allowlisted executable /usr/bin/sleep"), std::string::npos)
            << outcome.reason;
    }
    {
        EnforcementConfig config = quick_config();
        config.allowlist.users = {std::to_string(getuid())};
        Enforcer enforcer(config);
        EXPECT_EQ(enforcer.kill(sleeper.target(), KillOptions{}).outcome, "withheld");
        EXPECT_EQ(enforcer.pause(sleeper.target()).outcome, "withheld");
    }
    {
        EnforcementConfig config = quick_config();
        config.allowlist.cgroups = {"*"};
        Enforcer enforcer(config);
        const auto facts = read_proc_facts(static_cast<uint32_t>(sleeper.pid()));
        ASSERT_TRUE(facts.ok());
        if (!facts->cgroup_path.empty()) {
            EXPECT_EQ(enforcer.kill(sleeper.target(), KillOptions{}).outcome, "withheld");
        }
    }
    EXPECT_TRUE(sleeper.alive());
}

TEST(EnforcerSafety, dry_run_reports_and_touches_nothing) {
    Child child(Child::Kind::kExitsOnTerm);
    EnforcementConfig config = quick_config();
    config.dry_run = true;
    Enforcer enforcer(config);
    EXPECT_EQ(enforcer.kill(child.target(), KillOptions{}).outcome, "dry_run");
    EXPECT_EQ(enforcer.pause(child.target()).outcome, "dry_run");
    // A detection's own dry_run flag forces it too.
    enforcer.set_dry_run(false);
    Detection detection;
    detection.action = "kill";
    detection.dry_run = true;
    detection.process = child.target();
    auto outcome = enforcer.enforce(detection);
    ASSERT_TRUE(outcome);
    EXPECT_EQ(outcome->outcome, "dry_run");
    EXPECT_NE(outcome->reason.find("would SIGTERM"), std::string::npos);
    std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(child.alive());
}

TEST(EnforcerSafety, rate_limit_withholds_beyond_the_budget_per_minute) {
    uint64_t now = 1'000'000'000;
    EnforcementConfig config = quick_config();
    config.max_actions_per_minute = 2;
    EnforcerDependencies deps;
    deps.monotonic_ns = [&] { return now; };
    Enforcer enforcer(config, deps);
    Child a(Child::Kind::kExitsOnTerm), b(Child::Kind::kExitsOnTerm), c(Child::Kind::kExitsOnTerm);
    EXPECT_EQ(enforcer.kill(a.target(), KillOptions{}).outcome, "success");
    EXPECT_EQ(enforcer.kill(b.target(), KillOptions{}).outcome, "success");
    const auto limited = enforcer.kill(c.target(), KillOptions{});
    EXPECT_EQ(limited.outcome, "withheld");
    EXPECT_NE(limited.reason.find("rate limit"), std::string::npos);
    EXPECT_TRUE(c.alive());
    now += 61'000'000'000ull;
    EXPECT_EQ(enforcer.kill(c.target(), KillOptions{}).outcome, "success");
}

TEST(EnforcerPause, pause_stops_and_resume_continues) {
    Child child(Child::Kind::kExitsOnTerm);
    Enforcer enforcer(quick_config());
    auto paused = enforcer.pause(child.target());
    EXPECT_EQ(paused.outcome, "success") << paused.reason;
    EXPECT_EQ(read_proc_stat(static_cast<uint32_t>(child.pid()))->state, 'T');
    auto resumed = enforcer.resume(child.target());
    EXPECT_EQ(resumed.outcome, "success") << resumed.reason;
    EXPECT_NE(read_proc_stat(static_cast<uint32_t>(child.pid()))->state, 'T');
}

TEST(EnforcerDispatch, detections_map_to_actions_and_every_outcome_is_reported) {
    std::vector<EnforcementOutcome> reported;
    EnforcerDependencies deps;
    deps.on_outcome = [&](const EnforcementOutcome& outcome) { reported.push_back(outcome); };
    Enforcer enforcer(quick_config(), deps);
    Detection detection;
    detection.id = "det-1";
    detection.rule_id = "miner.xmrig";
    detection.severity = Severity::kCritical;
    detection.action = "alert";
    EXPECT_FALSE(enforcer.enforce(detection));
    detection.action = "teleport";
    auto unknown = enforcer.enforce(detection);
    ASSERT_TRUE(unknown);
    EXPECT_EQ(unknown->outcome, "failure");

    Child child(Child::Kind::kExitsOnTerm);
    detection.action = "kill";
    detection.process = child.target();
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    detection.last_seen_ns = static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull + now.tv_nsec;
    auto killed = enforcer.enforce(detection);
    ASSERT_TRUE(killed);
    EXPECT_EQ(killed->outcome, "success");
    EXPECT_EQ(killed->detection_id, "det-1");
    EXPECT_EQ(killed->rule_id, "miner.xmrig");
    EXPECT_EQ(killed->severity, Severity::kCritical);
    EXPECT_GT(killed->latency_ns, 0u);
    EXPECT_FALSE(killed->id.empty());
    EXPECT_EQ(killed->process.pid, static_cast<uint32_t>(child.pid()));
    ASSERT_EQ(reported.size(), 2u);
    EXPECT_NE(reported[0].id, reported[1].id);

    // block_ip without a blocker, and of loopback, never acts.
    detection.action = "block_ip";
    detection.peer = DetectionPeer{"127.0.0.1", 3333, "", ""};
    EXPECT_EQ(enforcer.enforce(detection)->outcome, "withheld");
    detection.peer = DetectionPeer{"198.51.100.7", 3333, "", ""};
    EXPECT_EQ(enforcer.enforce(detection)->outcome, "failure");
}

TEST(EnforcerWorker, runs_detections_in_order_off_the_caller_thread) {
    std::vector<std::string> outcomes;
    std::mutex mutex;
    EnforcerDependencies deps;
    deps.on_outcome = [&](const EnforcementOutcome& outcome) {
        std::lock_guard lock(mutex);
        outcomes.push_back(outcome.outcome);
    };
    Enforcer enforcer(quick_config(), deps);
    Child child(Child::Kind::kExitsOnTerm);
    EnforcerWorker worker(enforcer);
    Detection detection;
    detection.action = "pause";
    detection.process = child.target();
    worker.submit(detection);
    detection.action = "resume";
    worker.submit(detection);
    detection.action = "kill";
    worker.submit(detection);
    worker.drain();
    EXPECT_EQ(outcomes, (std::vector<std::string>{"success", "success", "success"}));
}

// Outcome ids name the agent instance: host, pid and start time in ns. Two
// agents started in the same second (the old "enf-<second>-<n>" collided)
// on two hosts, or twice on one host, never share an id.
TEST(EnforcerIds, outcome_ids_differ_across_hosts_pids_and_start_times) {
    const int64_t same_second = 1'800'000'000'000'000'000;
    auto outcome_id = [&](const std::string& host, uint32_t pid, int64_t start_ns) {
        EnforcerDependencies deps;
        deps.host_name = host;
        deps.self_pid = pid;
        deps.unix_ns = [start_ns] { return start_ns; };
        Enforcer enforcer(quick_config(), deps);
        Detection detection;
        detection.action = "teleport";  // an outcome "failure" without side effects
        return enforcer.enforce(detection)->id;
    };
    const auto self = static_cast<uint32_t>(getpid());
    const auto parent = static_cast<uint32_t>(getppid());
    const std::set<std::string> ids{
        outcome_id("gpu-a", self, same_second), outcome_id("gpu-b", self, same_second),
        outcome_id("gpu-a", parent, same_second), outcome_id("gpu-a", self, same_second + 1)};
    EXPECT_EQ(ids.size(), 4u);
    EXPECT_EQ(outcome_id("gpu-a", self, same_second),
              "enf-gpu-a-" + std::to_string(self) + "-" + std::to_string(same_second) + "-1");

    // Defaults: this host's name and pid; one enforcer counts up.
    Enforcer enforcer(quick_config());
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    EXPECT_EQ(enforcer.id_prefix().rfind(
                  "enf-" + std::string(host) + "-" + std::to_string(getpid()) + "-", 0),
              0u)
        << enforcer.id_prefix();
    Detection detection;
    detection.action = "teleport";
    const auto first = enforcer.enforce(detection)->id;
    const auto second = enforcer.enforce(detection)->id;
    EXPECT_NE(first, second);
    EXPECT_EQ(first, enforcer.id_prefix() + "-1");
}

// Records kill_now registrations; tags in order.
class RecordingKnownBad : public KnownBadRegistry {
  public:
    Status add_known_bad_file(const FileIdentity&, uint32_t rule_id) override {
        tags.push_back(rule_id);
        return {};
    }
    Status add_known_bad_name(const std::string&, uint32_t rule_id) override {
        tags.push_back(rule_id);
        return {};
    }
    std::vector<uint32_t> tags;
};

// The kernel's kill_now, reported afterwards by the sensor, becomes an
// outcome like any other: the rule of the detection whose kill_now
// registered the file, or the rule the caller names for its own tags.
TEST(EnforcerKernelKill, in_kernel_kills_are_reported_as_outcomes_of_their_rule) {
    std::vector<EnforcementOutcome> reported;
    RecordingKnownBad known_bad;
    EnforcerDependencies deps;
    deps.known_bad = &known_bad;
    deps.on_outcome = [&](const EnforcementOutcome& outcome) { reported.push_back(outcome); };
    Enforcer enforcer(quick_config(), deps);
    Child child(Child::Kind::kSleepExec);
    Detection detection;
    detection.id = "det-7";
    detection.rule_id = "GG-CORR-0010";
    detection.severity = Severity::kCritical;
    detection.action = "kill_now";
    detection.process = child.target();
    ASSERT_EQ(enforcer.enforce(detection)->outcome, "success");
    ASSERT_EQ(known_bad.tags.size(), 1u);

    DetectionProcess later;
    later.pid = 4242;
    later.comm = "sleep";
    const auto kernel = enforcer.kernel_kill(later, known_bad.tags[0], 0,
                                             "SIGKILL in the kernel at exec (executable 8:1)");
    EXPECT_EQ(kernel.action, "kill_now");
    EXPECT_EQ(kernel.outcome, "success");
    EXPECT_EQ(kernel.reason, "SIGKILL in the kernel at exec (executable 8:1)");
    EXPECT_EQ(kernel.rule_id, "GG-CORR-0010");
    EXPECT_EQ(kernel.detection_id, "det-7");
    EXPECT_EQ(kernel.severity, Severity::kCritical);
    EXPECT_EQ(kernel.process.pid, 4242u);
    ASSERT_EQ(reported.size(), 2u);
    EXPECT_EQ(reported[1].id, kernel.id);
    EXPECT_NE(reported[0].id, reported[1].id);

    const auto by_name =
        enforcer.kernel_kill(later, 0x80001234u, 0, "SIGKILL in the kernel", "local-doomed");
    EXPECT_EQ(by_name.rule_id, "local-doomed");
    EXPECT_EQ(by_name.detection_id, "");
    const auto refused = enforcer.kernel_kill(later, 0x80001234u, -ESRCH, "SIGKILL", "x");
    EXPECT_EQ(refused.outcome, "failure");
    EXPECT_NE(refused.reason.find("bpf_send_signal failed"), std::string::npos) << refused.reason;
    EXPECT_EQ(reported.size(), 4u);
}

TEST(KnownBadFiles, sha256_registrations_resolve_to_inodes) {
    gpuguard::testing::TempDir dir("gg-sha");
    const std::string a = (dir / "a").string(), b = (dir / "b").string();
    { std::ofstream(a) << "miner"; }
    { std::ofstream(b) << "not a miner"; }
    auto hash = sha256_file(a);
    ASSERT_TRUE(hash.ok());
    EXPECT_EQ(
        *hash,
        "8b133a3868993176b613738816247a7f4d357cae555996519cf5b543e9b3554b");  // sha256("miner")
    const auto found = resolve_sha256({*hash}, {a, b, (dir / "missing").string()});
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].first, a);
    auto identity = file_identity(a);
    ASSERT_TRUE(identity.ok());
    EXPECT_EQ(found[0].second, *identity);
    EXPECT_NE(identity->ino, 0u);
}

}  // namespace
}  // namespace gpuguard::agent
