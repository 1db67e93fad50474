// Runs a function in a forked child named `comm` and reaps it. Tests use it
// so that every event they expect comes from a pid they started.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace gpuguard::testing {

// Forks, sets the child's comm, runs `body` (which must only make
// async-signal-safe calls) and _exit()s with its return value. Waits for the
// child and returns its pid; `exit_code` receives its exit status.
pid_t run_in_child(const std::string& comm, const std::function<int()>& body,
                   int* exit_code = nullptr);

// For a forked child, first thing: `signo` comes when the test process
// dies (a crash, CTest's timeout), so nothing the test started outlives it
// holding CTest's output pipes open or a fake GPU. `parent` is the test's
// getpid() taken before fork(); the child _exit()s if it is already gone.
void end_with_parent(pid_t parent, int signo);

// Starts `exe` with `argv` (argv[0] included) and environment `env` in
// `cwd`, and returns its pid once it has exec'd (its /proc entries show
// the new image), or -1 with errno when the exec failed. The child gets
// SIGKILL when the test process dies; reap it with ChildReaper.
pid_t spawn_process(const std::string& exe, const std::vector<std::string>& argv,
                    const std::string& cwd, const std::vector<std::string>& env = {});

// Drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the calling thread's
// effective set: capabilities are per thread and a thread it starts
// inherits them, so a worker made afterwards on this thread reads files as
// root does on a FUSE mount without allow_other (mode bits decide, as for
// anyone). False with errno when capset fails.
bool drop_dac_capabilities_in_this_thread();

// Kills (SIGKILL) and reaps a child the test started, when the scope ends.
class ChildReaper {
  public:
    explicit ChildReaper(pid_t pid) : pid_(pid) {}
    ~ChildReaper();
    ChildReaper(const ChildReaper&) = delete;
    ChildReaper& operator=(const ChildReaper&) = delete;

  private:
    pid_t pid_;
};

// A forked child that acts on request: `setup` runs first in the child
// (its name, signal dispositions), then every byte ask() writes is passed
// to `handler` there, and the int it returns comes back (an errno, say).
// The constructor returns once `setup` has run. Destruction SIGKILLs and
// reaps it unless try_reap() already did. Only async-signal-safe work (or
// what a single-threaded test may do after fork) belongs in the callbacks.
class RequestChild {
  public:
    explicit RequestChild(std::function<int(char)> handler, std::function<void()> setup = {});
    // The same, with `program` exec'd as the child under the name `comm`
    // (its argv[0] and comm) with `args`: it reads requests on fd 3 and
    // answers on fd 4 (gg_test_io_worker). The constructor returns once it
    // has answered its first 0; ask() then gives -1 if the exec failed.
    RequestChild(const std::string& program, const std::string& comm,
                 const std::vector<std::string>& args);
    ~RequestChild();
    RequestChild(const RequestChild&) = delete;
    RequestChild& operator=(const RequestChild&) = delete;

    pid_t pid() const { return pid_; }
    // The handler's answer to `request`; -1 when the child is gone.
    int ask(char request);
    // Its wait status once it has ended (reaped then), nullopt while it runs.
    std::optional<int> try_reap();

  private:
    pid_t pid_ = -1;
    bool reaped_ = false;
    int status_ = 0;
    int requests_[2] = {-1, -1};
    int answers_[2] = {-1, -1};
};

// A RequestChild that plays a GPU process doing I/O, named `comm`. Its
// requests, each answered with an errno (0: it worked): 'g' opens
// `gpu_node` and keeps it open; 'c' connects over TCP to 127.0.0.1:
// `tcp_port` and makes a UDP socket; 's' writes kIoMessageBytes on that
// connection; 't' writes a TLS application-data record of kIoMessageBytes
// there (an encrypted share); 'u' sends kIoDatagramBytes to
// 127.0.0.1:`udp_port`; 'f' writes kIoFileBytes to `file`, truncated first;
// 'b' starts one more thread that spins on the CPU until the worker ends.
struct IoWorkerOptions {
    std::string comm;
    std::string gpu_node;
    std::string file;
    uint16_t tcp_port = 0;
    uint16_t udp_port = 0;
    std::string tcp_address = "127.0.0.1";  // where 'c' connects
    // 'p': a SOCKS5 CONNECT (RFC 1928, no authentication) over the 'c'
    // connection to this address or name and port.
    std::string socks_target = "";
    uint16_t socks_port = 0;
    // When set, the worker is this program (gg_test_io_worker) exec'd, not a
    // fork of the test binary: a benign worker whose executable YARA has
    // nothing to say about.
    std::string program = "";
};
inline constexpr size_t kIoMessageBytes = 100;
inline constexpr size_t kIoDatagramBytes = 40;
inline constexpr size_t kIoFileBytes = 65536;
// Requests: 'g' opens the GPU node, 'c' connects over TCP (and makes a UDP
// socket), 'p' asks the SOCKS5 proxy it connected to for socks_target,
// 'h' sends the first record of a TLS handshake, 's' a plain message, 't'
// a TLS application-data record, 'q' a line and reads the one-line answer,
// 'r' waits (10 s at most) for a line the peer sends on its own, 'u' a datagram, 'f' writes the
// file, 'b' spins a thread on a core, 'x' closes the TCP connection.
std::unique_ptr<RequestChild> start_io_worker(const IoWorkerOptions& options);

}  // namespace gpuguard::testing
