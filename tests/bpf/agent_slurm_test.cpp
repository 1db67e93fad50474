// Slurm jobs seen by the real agent, against a real single-node Slurm
// (Debian's slurmctld, slurmd and munge) the test starts in its own
// directory: its own munge key and socket, loopback ports, state and spool,
// proctrack/cgroup on cgroup v1 (slurmstepd's /slurm_<node>/uid_/job_/step_
// hierarchy), and a GRES of two fake GPU nodes (1:7 and 1:8, registered
// as GPUs). Batch jobs each get one GPU: one opens only its own (silent);
// one that opens both, running before the agent starts, is GG-CORR-0033 at
// the start; one started under the agent that does the same is named at
// its own GPU opens. The detection names the job, its step, user, account
// and partition, the GPU it took and the one it was given, and replay of
// the journal names them the same. The daemons
// are stopped and their cgroups removed at the end, whatever happened.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/siem/test_pki.h"
#include "tests/support/run_command.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::file_bytes;
using gpuguard::testing::run_command;
using gpuguard::testing::Subprocess;
using nlohmann::literals::operator""_json_pointer;
namespace fs = std::filesystem;

constexpr const char* kSlurmTools[] = {
    "/usr/sbin/munged", "/usr/sbin/mungekey", "/usr/sbin/slurmctld", "/usr/sbin/slurmd",
    "/usr/bin/sbatch",  "/usr/bin/sinfo",     "/usr/bin/squeue",     "/usr/bin/scancel"};

std::string short_host_name() {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    std::string out(name);
    return out.substr(0, out.find('.'));
}

// One node's Slurm, started in `dir` and stopped (with its jobs) when it
// goes: each daemon by the pid its pid file names, then the cgroups
// slurmstepd made for the node.
class SlurmNode {
  public:
    SlurmNode(const fs::path& dir, std::string node) : dir_(dir), node_(std::move(node)) {}
    ~SlurmNode() { stop(); }

    // Writes the configuration and starts munged, slurmctld and slurmd;
    // false (with the daemons' logs in `why`) when the node is not idle in 20 s.
    bool start(std::string& why) {
        fs::create_directories(dir_ / "state");
        fs::create_directories(dir_ / "spool");
        const auto key = run_command({"/usr/sbin/mungekey", "-c", "-k", path("munge.key")}, 30s);
        if (key.exit_code != 0) return (why = "mungekey: " + key.stderr_text), false;
        const uint16_t ctld_port = gpuguard::testing::free_port();
        const uint16_t slurmd_port = gpuguard::testing::free_port();
        std::ofstream(dir_ / "slurm.conf")
            << "ClusterName=gg\nSlurmctldHost=" << short_host_name() << "(127.0.0.1)\n"
            << "SlurmctldPort=" << ctld_port << "\nSlurmdPort=" << slurmd_port << "\n"
            << "SlurmUser=root\nSlurmdUser=root\nMailProg=/bin/true\n"
            << "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" << path("munge.sock")
            << "\nStateSaveLocation=" << path("state") << "\nSlurmdSpoolDir=" << path("spool")
            << "\nSlurmctldPidFile=" << path("slurmctld.pid")
            << "\nSlurmdPidFile=" << path("slurmd.pid")
            << "\nSlurmctldLogFile=" << path("slurmctld.log")
            << "\nSlurmdLogFile=" << path("slurmd.log")
            << "\nPlugStackConfig=" << path("plugstack.conf")
            << "\nProctrackType=proctrack/cgroup\nTaskPlugin=task/none\n"
            << "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
            << "SchedulerType=sched/builtin\nSchedulerParameters=sched_min_interval=0\n"
            << "MpiDefault=none\nReturnToService=2\n"
            << "GresTypes=gpu\nAccountingStorageType=accounting_storage/none\n"
            << "JobCompType=jobcomp/none\nJobAcctGatherType=jobacct_gather/none\n"
            << "NodeName=" << node_ << " NodeHostname=" << short_host_name()
            << " NodeAddr=127.0.0.1 CPUs=1 Gres=gpu:2 State=UNKNOWN\n"
            << "PartitionName=ggpart Nodes=" << node_
            << " Default=YES MaxTime=5 OverSubscribe=FORCE:4 State=UP\n";
        // GRES indices 0 and 1 are gpu0 and gpu1.
        std::ofstream(dir_ / "gres.conf")
            << "NodeName=" << node_ << " Name=gpu File=" << path("gpu[0-1]") << "\n";
        std::ofstream(dir_ / "cgroup.conf")
            << "CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\n";
        std::ofstream(dir_ / "plugstack.conf");
        started_ = true;
        for (const auto& daemon :
             {std::vector<std::string>{
                  "/usr/sbin/munged", "-f", "--socket=" + path("munge.sock"),
                  "--key-file=" + path("munge.key"), "--log-file=" + path("munged.log"),
                  "--pid-file=" + path("munged.pid"), "--seed-file=" + path("munged.seed")},
              std::vector<std::string>{"/usr/sbin/slurmctld", "-f", path("slurm.conf"), "-i"},
              std::vector<std::string>{"/usr/sbin/slurmd", "-f", path("slurm.conf"), "-N",
                                       node_}}) {
            const auto result = run_command(daemon, 30s);
            if (result.exit_code != 0) {
                return (why = daemon[0] + ": " + result.stderr_text + logs()), false;
            }
        }
        for (int attempt = 0; attempt < 100; ++attempt) {
            if (client({"/usr/bin/sinfo", "-h", "-o", "%T"}).stdout_text == "idle\n") return true;
            std::this_thread::sleep_for(200ms);
        }
        why = "the node is not idle: " + client({"/usr/bin/sinfo"}).stdout_text + logs();
        return false;
    }

    // A Slurm client command run against this node's configuration.
    gpuguard::testing::CommandResult client(std::vector<std::string> argv) const {
        std::vector<std::string> with_conf = {"/usr/bin/env", "SLURM_CONF=" + path("slurm.conf")};
        with_conf.insert(with_conf.end(), argv.begin(), argv.end());
        return run_command(with_conf, 30s);
    }

    // A batch job running `script` with one GPU; its id, "" on failure.
    std::string submit(const std::string& script) {
        const auto result = client({"/usr/bin/sbatch", "--parsable", "--account=physics",
                                    "--gres=gpu:1", "-o", path("job-%j.out"), "--wrap", script});
        EXPECT_EQ(result.exit_code, 0) << result.stderr_text << logs();
        std::string id = result.stdout_text.substr(0, result.stdout_text.find_first_of(";\n"));
        if (!id.empty()) jobs_.push_back(id);
        return id;
    }

    // Cancels job `id` and waits (bounded) until it has left the queue.
    void cancel(const std::string& id) {
        client({"/usr/bin/scancel", id});
        for (int i = 0; i < 100; ++i) {
            if (client({"/usr/bin/squeue", "-h", "-j", id}).stdout_text.empty()) return;
            std::this_thread::sleep_for(100ms);
        }
    }

    std::string path(const std::string& name) const { return (dir_ / name).string(); }
    std::string logs() const {
        return "\nslurmctld.log:\n" + file_bytes(dir_ / "slurmctld.log") + "\nslurmd.log:\n" +
               file_bytes(dir_ / "slurmd.log");
    }

  private:
    void stop() {
        if (!started_) return;
        for (const auto& job : jobs_) client({"/usr/bin/scancel", "--quiet", job});
        // Until slurmstepd has ended them and removed their cgroups (bounded).
        for (int i = 0; i < 100 && !jobs_.empty(); ++i) {
            if (client({"/usr/bin/squeue", "-h"}).stdout_text.empty()) break;
            std::this_thread::sleep_for(100ms);
        }
        for (const char* daemon : {"slurmd", "slurmctld", "munged"}) {
            std::ifstream in(dir_ / (std::string(daemon) + ".pid"));
            pid_t pid = 0;
            if (!(in >> pid) || pid <= 1) continue;
            kill(pid, SIGTERM);
            // Bounded: a daemon that does not go in 10 s is left to the runner.
            for (int i = 0; i < 200 && kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(50ms);
        }
        // slurmstepd removes each job's cgroup; the node's own stays.
        std::error_code ec;
        for (const auto& entry :
             fs::directory_iterator("/sys/fs/cgroup/freezer/slurm_" + node_, ec)) {
            fs::remove(entry.path(), ec);  // uid_N, empty once the jobs ended
        }
        fs::remove("/sys/fs/cgroup/freezer/slurm_" + node_, ec);
    }

    fs::path dir_;
    std::string node_;
    bool started_ = false;
    std::vector<std::string> jobs_;
};

class AgentSlurmTest : public AgentDetectTest {
  protected:
    // The GG-CORR-0033/0034 records of Slurm job `job` among JSON lines.
    static std::string allocation_alerts_of(const std::string& lines, const std::string& job) {
        std::string out;
        std::istringstream in(lines);
        for (std::string line; std::getline(in, line);) {
            const auto record = nlohmann::json::parse(line, nullptr, false);
            if (!record.is_object()) continue;
            const std::string rule = record.value("/rule/id"_json_pointer, "");
            if ((rule == "GG-CORR-0033" || rule == "GG-CORR-0034") &&
                record.value("/gpuguard/slurm/job_id"_json_pointer, "") == job) {
                out += line + "\n";
            }
        }
        return out;
    }
};

TEST_F(AgentSlurmTest, jobs_on_a_gpu_outside_their_gres_are_named_and_one_on_its_own_is_silent) {
    GG_REQUIRE_PRIVILEGED();
    for (const char* tool : kSlurmTools) {
        if (access(tool, X_OK) == 0) continue;
        if (gpuguard::testing::privileged_required()) {
            FAIL() << tool << " is missing: scripts/setup.sh installs slurmctld, slurmd, munge";
        }
        GTEST_SKIP() << tool << " is missing (scripts/setup.sh installs it)";
    }
    // The fixture's gpu0 is 1:7; gpu1 is 1:8, both GPUs to the agent.
    ASSERT_EQ(mknod((dir_ / "gpu1").c_str(), S_IFCHR | 0666, makedev(1, 8)), 0);
    replace_in_config("[\"1:7\"]", "[\"1:7\", \"1:8\"]");
    // The daemons check that root owns the directories they use.
    fs::permissions(dir_.path(), fs::perms::owner_all | fs::perms::group_read |
                                     fs::perms::group_exec | fs::perms::others_read |
                                     fs::perms::others_exec);
    const fs::path alerts = dir_ / "alerts.jsonl";
    add_file_output(alerts);
    use_control_socket();
    SlurmNode slurm(dir_.path(), "gg" + std::to_string(getpid()));
    std::string why;
    ASSERT_TRUE(slurm.start(why)) << why;

    // Before the agent: a job that keeps to its GPU (it opens the node of
    // its GRES index) and one that opens both. Each says when it has.
    const std::string own = (dir_ / "gpu").string();
    const auto opened = [&](const std::string& marker) {
        for (int i = 0; i < 150 && !fs::exists(slurm.path(marker)); ++i) {
            std::this_thread::sleep_for(100ms);
        }
        return fs::exists(slurm.path(marker));
    };
    const std::string keeps = slurm.submit("exec 5<" + own + "$SLURM_JOB_GPUS; touch " +
                                           slurm.path("keeps-open") + "; sleep 60");
    const std::string early = slurm.submit("exec 5<" + own + "0; exec 6<" + own + "1; touch " +
                                           slurm.path("early-open") + "; sleep 60");
    ASSERT_FALSE(keeps.empty());
    ASSERT_FALSE(early.empty());
    ASSERT_TRUE(opened("keeps-open") && opened("early-open")) << slurm.logs();

    // The agent finds them running: the one outside its GRES is named at start.
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const auto at_start = wait_for_output(
        alerts,
        [&](const nlohmann::json& record) {
            return record.value("/rule/id"_json_pointer, "") == "GG-CORR-0033" &&
                   record.value("/gpuguard/slurm/job_id"_json_pointer, "") == early;
        },
        10s);
    ASSERT_TRUE(at_start) << file_bytes(alerts) << agent.stderr_text() << slurm.logs();

    // Its GPU freed, a job started under the agent takes both: named at
    // its own GPU opens.
    slurm.cancel(early);
    const std::string strays = slurm.submit("exec 5<" + own + "0; exec 6<" + own + "1; sleep 60");
    ASSERT_FALSE(strays.empty());
    const auto detection = wait_for_output(
        alerts,
        [&](const nlohmann::json& record) {
            return record.value("/rule/id"_json_pointer, "") == "GG-CORR-0033" &&
                   record.value("/gpuguard/slurm/job_id"_json_pointer, "") == strays;
        },
        20s);
    ASSERT_TRUE(detection) << file_bytes(alerts) << agent.stderr_text() << slurm.logs();
    const nlohmann::json& job = (*detection)["gpuguard"]["slurm"];
    EXPECT_EQ(job["step_id"], "batch") << detection->dump();  // from the v1 cgroup
    EXPECT_EQ(job["user"], "root");
    EXPECT_EQ(job["account"], "physics");
    EXPECT_EQ(job["partition"], "ggpart");
    EXPECT_EQ((*detection)["orchestrator"]["type"], "slurm");
    EXPECT_EQ((*detection)["orchestrator"]["resource"]["id"], strays);
    // It was given one GPU and took the other.
    const std::string given = job["gpus"].get<std::string>();
    ASSERT_TRUE(given == "0" || given == "1") << detection->dump();
    const std::string given_device = given == "0" ? "1:7" : "1:8";
    const std::string taken_device = given == "0" ? "1:8" : "1:7";
    const std::string evidence = detection->dump();
    EXPECT_NE(evidence.find("Slurm job " + strays +
                            " step batch (user root, account physics, "
                            "partition ggpart) took GPU " +
                            taken_device + "; it was given " + given_device +
                            " (SLURM_JOB_GPUS=" + given + ")"),
              std::string::npos)
        << evidence;

    // The job that kept to its GPU raised no allocation alert, and `gpuguard
    // ps` names it all the same.
    EXPECT_EQ(allocation_alerts_of(file_bytes(alerts), keeps), "");
    const auto socket = (dir_ / "control.sock").string();
    const auto listed = run_command({GPUGUARD_BINARY, "ps", "--json", "--socket", socket});
    ASSERT_EQ(listed.exit_code, 0) << listed.stderr_text;
    bool keeps_listed = false;
    for (const auto& process : nlohmann::json::parse(listed.stdout_text)) {
        if (process.value("/slurm/job_id"_json_pointer, "") != keeps) continue;
        keeps_listed = true;
        EXPECT_EQ(process["slurm"]["account"], "physics") << process.dump();
        EXPECT_EQ(process["slurm"]["step_id"], "batch");
    }
    EXPECT_TRUE(keeps_listed) << listed.stdout_text;
    const auto table = run_command({GPUGUARD_BINARY, "ps", "--socket", socket});
    EXPECT_NE(table.stdout_text.find("slurm:" + keeps + ".batch"), std::string::npos)
        << table.stdout_text;
    ASSERT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
    // The whole output, by job (Slurm, not the test, started the jobs'
    // processes): the allocation rule for the two that strayed, at its
    // warning, and nothing else at warning or above for any of the three.
    std::set<std::tuple<std::string, std::string, std::string>> by_job;
    std::istringstream alert_lines(file_bytes(alerts));
    for (std::string line; std::getline(alert_lines, line);) {
        const auto record = nlohmann::json::parse(line, nullptr, false);
        if (!record.is_object() || !record.contains("rule")) continue;
        const std::string job = record.value("/gpuguard/slurm/job_id"_json_pointer, "");
        if (job != keeps && job != early && job != strays) continue;
        const std::string rule = record.value("/rule/id"_json_pointer, "");
        const std::string level = record.value("/log/level"_json_pointer, "");
        const bool alarm = level == "warning" || level == "error" || level == "critical";
        if (alarm || rule == "GG-CORR-0033" || rule == "GG-CORR-0034") {
            by_job.emplace(rule, job, level);
        }
    }
    EXPECT_EQ(by_job, (std::set<std::tuple<std::string, std::string, std::string>>{
                          {"GG-CORR-0033", early, "warning"}, {"GG-CORR-0033", strays, "warning"}}))
        << file_bytes(alerts);

    // The journal's workload events carry the job: replay names it alike.
    const auto replayed = replay_journal();
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    EXPECT_EQ(allocation_alerts_of(replayed.stdout_text, keeps), "");
    bool replay_named = false, replay_named_at_start = false;
    std::istringstream replay_lines(replayed.stdout_text);
    for (std::string line; std::getline(replay_lines, line);) {
        const auto record = nlohmann::json::parse(line, nullptr, false);
        if (!record.is_object()) continue;
        replay_named_at_start = replay_named_at_start ||
                                (record.value("/rule/id"_json_pointer, "") == "GG-CORR-0033" &&
                                 record.value("/gpuguard/slurm/job_id"_json_pointer, "") == early);
        replay_named =
            replay_named || (record.value("/rule/id"_json_pointer, "") == "GG-CORR-0033" &&
                             record.value("/gpuguard/slurm/job_id"_json_pointer, "") == strays &&
                             record.value("/gpuguard/slurm/account"_json_pointer, "") == "physics");
    }
    EXPECT_TRUE(replay_named) << replayed.stdout_text;
    EXPECT_TRUE(replay_named_at_start) << replayed.stdout_text;
}

}  // namespace
