#include "location_check.h"

#include <charconv>

#include "gpuguard/rules/correlation.h"
#include "gpuguard/state/process_origin.h"

namespace gpuguard::agent {
namespace {

// Ancestors looked at: a runtime's program, its bootloader, a shell or
// launcher above them.
constexpr size_t kAncestorDepth = 4;

std::string named(const Ancestor& ancestor) {
    return (ancestor.exe.empty() ? ancestor.comm : ancestor.exe) + " (pid " +
           std::to_string(ancestor.pid) + ")";
}

// An ancestor living outside `dir` (and outside every temporary directory:
// a dropper in /tmp vouches for nothing) that maps or holds a file below it.
std::string ancestor_using(uint32_t pid, const rules::LookAlikeClaim& claim,
                           const std::string& proc_root) {
    for (const Ancestor& ancestor : ancestors_of(pid, kAncestorDepth, proc_root)) {
        if (ancestor.exe.empty() || rules::temporary_path(ancestor.exe)) continue;
        if (uses_files_below(ancestor.pid, claim.dir, proc_root)) {
            return "verified: " + named(ancestor) + " uses files from " + claim.dir;
        }
    }
    return "refused: no ancestor outside a temporary directory uses files from " + claim.dir;
}

// Nuitka's default unpack directory is {TEMP}/onefile_{PID}_{TIME}, PID the
// bootstrap's own.
std::string nuitka_parent(uint32_t pid, const rules::LookAlikeClaim& claim,
                          const std::string& proc_root) {
    const std::string_view name = std::string_view(claim.dir).substr(claim.dir.rfind('/') + 1);
    const std::string_view digits = name.substr(std::string_view("onefile_").size());
    uint32_t named_pid = 0;
    const auto parsed = std::from_chars(digits.data(), digits.data() + digits.size(), named_pid);
    if (parsed.ec != std::errc() || parsed.ptr == digits.data()) {
        return "refused: " + claim.dir + " does not name the pid of the program that unpacked it";
    }
    for (const Ancestor& ancestor : ancestors_of(pid, kAncestorDepth, proc_root)) {
        if (ancestor.pid != named_pid) continue;
        if (ancestor.exe.empty() || rules::temporary_path(ancestor.exe)) break;
        return "verified: " + named(ancestor) + " is the onefile program that unpacked it";
    }
    return "refused: no ancestor is pid " + std::to_string(named_pid) + ", which " + claim.dir +
           " names as the program that unpacked it";
}

std::string ollama_server(uint32_t pid, const rules::LookAlikeClaim& claim,
                          const std::string& proc_root) {
    for (const Ancestor& ancestor : ancestors_of(pid, kAncestorDepth, proc_root)) {
        const std::string_view exe = ancestor.exe;
        const std::string_view base = exe.substr(exe.rfind('/') + 1);
        if (base == "ollama" && !rules::temporary_path(exe)) {
            return "verified: " + named(ancestor) + " is the Ollama server of its runners";
        }
    }
    return "refused: no ancestor is an ollama server outside a temporary directory (runners in " +
           claim.dir + ")";
}

std::string appimage_mount(uint32_t pid, const rules::LookAlikeClaim& claim,
                           const std::string& proc_root) {
    const auto mount = mount_at(pid, claim.dir, proc_root);
    if (!mount) return "refused: nothing is mounted at " + claim.dir;
    // An AppImage's runtime mounts its squashfs through FUSE (type 2) or as
    // squashfs itself (type 1, mounted by root).
    if (mount->fstype.starts_with("fuse") || mount->fstype == "squashfs") {
        return "verified: " + mount->fstype + " mounted at " + claim.dir;
    }
    return "refused: " + claim.dir + " is a " + mount->fstype + " mount, not an AppImage's";
}

}  // namespace

std::string check_location(uint32_t pid, std::string_view exe, const std::string& proc_root) {
    const auto claim = rules::look_alike_claim(exe);
    if (!claim) return "";
    std::string verdict;
    switch (claim->kind) {
        case rules::LookAlike::kAppImage:
            verdict = appimage_mount(pid, *claim, proc_root);
            break;
        case rules::LookAlike::kNuitka:
            verdict = nuitka_parent(pid, *claim, proc_root);
            break;
        case rules::LookAlike::kOllama:
            verdict = ollama_server(pid, *claim, proc_root);
            break;
        case rules::LookAlike::kPyInstaller:
        case rules::LookAlike::kStaticx:
            verdict = ancestor_using(pid, *claim, proc_root);
            break;
    }
    // "verified: " / "refused: ", the runtime's name, then how or why.
    const size_t colon = verdict.find(": ") + 2;
    return verdict.substr(0, colon) + rules::to_string(claim->kind) + ": " + verdict.substr(colon);
}

}  // namespace gpuguard::agent
