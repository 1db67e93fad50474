// Library-loading environments (library_injection): each LD_PRELOAD library
// and LD_LIBRARY_PATH directory of a GPU process is judged on its real path
// and on what the agent found on disk when it read the environment
// (gpuguard/state/loader_paths.h). Nothing is said of the system library
// directories, of what a package, a conda environment, a virtualenv or
// installed Python distributions vouch for, nor of the library directories
// that CUDA, NGC, ROCm, oneAPI and HPC images set, unless changed just
// before or writable by others. Anything else is named with its signs
// (docs/detections.md, "Library injection").
#include "correlator_support.h"
#include "gpuguard/common/text.h"
#include "gpuguard/state/loader_paths.h"

namespace gpuguard::agent {
namespace {

using rules::LibrarySign;

constexpr int64_t kRecentSeconds = 600;

bool at_or_below(std::string_view dir, std::string_view base) {
    return dir == base || (dir.starts_with(base) && dir[base.size()] == '/');
}

// /lib, /usr/lib, /lib64, /usr/lib64, /usr/local/lib and their multiarch
// subdirectories, /usr/local/cuda*/ and /opt/rocm*/: root's alone.
bool system_library_dir(std::string_view dir) {
    static constexpr std::string_view kDirs[] = {
        "/lib",       "/lib64",     "/lib32",      "/libx32",        "/usr/lib",
        "/usr/lib64", "/usr/lib32", "/usr/libx32", "/usr/local/lib", "/usr/local/lib64"};
    if (std::any_of(std::begin(kDirs), std::end(kDirs),
                    [&](std::string_view base) { return at_or_below(dir, base); })) {
        return true;
    }
    // A versioned toolkit: /usr/local/cuda-12.4/lib64, /opt/rocm-6.1.0/lib.
    if (dir.starts_with("/usr/local/cuda") || dir.starts_with("/opt/rocm")) return true;
    // Apptainer's --nv binds the host's driver libraries into a directory of
    // its own, made as the container starts (so always new).
    return at_or_below(dir, "/.singularity.d/libs");
}

// The library directories the standard images put on LD_LIBRARY_PATH
// (their Dockerfiles; docs/detections.md lists the sources): the NVIDIA
// container toolkit's legacy mount and the CUDA images' ENV, conda's base
// in the PyTorch images, NGC's HPC-X, MPI, UCX, TensorRT and Triton, AWS's
// EFA and OFI-NCCL, Intel oneAPI, GDRCopy, NVIDIA's own /opt trees, HAMi's
// GPU-sharing library (/usr/local/vgpu/libvgpu.so, preloaded into pods).
bool deployment_dir(std::string_view dir) {
    static constexpr std::string_view kDirs[] = {
        "/usr/local/nvidia", "/opt/conda",          "/opt/hpcx",         "/usr/local/mpi",
        "/usr/local/ucx",    "/usr/local/tensorrt", "/opt/tritonserver", "/opt/nvidia",
        "/opt/amazon",       "/opt/aws-ofi-nccl",   "/opt/intel",        "/usr/local/gdrcopy",
        "/usr/local/nccl",   "/opt/pytorch",        "/usr/local/vgpu"};
    return std::any_of(std::begin(kDirs), std::end(kDirs),
                       [&](std::string_view base) { return at_or_below(dir, base); });
}

// For records from before the agent read the disk: the places conda,
// mamba, virtualenvs and pip put libraries, by their spelling alone.
bool environment_by_name(std::string_view dir) {
    static constexpr std::string_view kParts[] = {
        "/envs/",       "/site-packages/", "/dist-packages/", "/miniconda3/", "/anaconda3/",
        "/miniforge3/", "/mambaforge/",    "/micromamba/",    "/.venv/",      "/venv/"};
    return std::any_of(std::begin(kParts), std::end(kParts), [&](std::string_view part) {
        return dir.find(part) != std::string_view::npos;
    });
}

std::string sign_text(LibrarySign sign, const LoaderPath& entry) {
    switch (sign) {
        case LibrarySign::kTemporary:
            return "in a temporary directory";
        case LibrarySign::kRecent:
            return "changed " + std::to_string(entry.age_s) + " s before";
        case LibrarySign::kOthersCanWrite:
            return "writable by other users";
        case LibrarySign::kMinerSignature:
            return "named like a miner";
    }
    return "";
}

}  // namespace

void CorrelatorImpl::record_env(uint32_t pid, uint64_t ts_ns, const ProcessEnv& env) {
    ProcessEvidence& evidence = book_.of(pid);
    evidence.env = env;
    evidence.env_ns = ts_ns;
    evidence.libraries = judge_libraries(env);
    evidence.dirty = true;
    // A preloaded library nothing vouches for is scanned as its executable
    // would be (live only: replay has the verdicts in the stream).
    if (!options_.request_scans) return;
    for (const InjectedLibrary& library : evidence.libraries) {
        if (!library.preloaded_file) continue;
        scan_requests_.push_back(ScanRequest{pid, ts_ns, "", "library", library.where});
    }
}

void CorrelatorImpl::record_library_scan(uint32_t pid, uint64_t ts_ns, const ExeScan& scan) {
    if (!scan.error.empty() || scan.rules.empty()) return;
    ProcessEvidence& evidence = book_.of(pid);
    std::vector<std::string_view> ids(scan.signature_ids.begin(), scan.signature_ids.end());
    add_hits(evidence, EvidenceField::kYara, ids, ts_ns,
             "preloaded library " + scan.library + " sha256:" + scan.sha256 +
                 " yara:" + join(scan.rules, " "));
    // A YARA rule on it is a miner's mark as its name would be.
    // (A second verdict on it, from a second request, adds nothing.)
    const std::string yara = " (YARA: " + join(scan.rules, ", ") + ")";
    for (InjectedLibrary& library : evidence.libraries) {
        if (library.where != scan.library || library.detail.ends_with(yara)) continue;
        if (std::find(library.signs.begin(), library.signs.end(), LibrarySign::kMinerSignature) ==
            library.signs.end()) {
            library.signs.push_back(LibrarySign::kMinerSignature);
        }
        library.detail += yara;
    }
    evidence.dirty = true;
}

std::string CorrelatorImpl::miner_signature_of(const std::string& path) {
    // The name first (libxmrig-cuda.so), then the whole path (a miner's
    // directory); a miner's own signatures only, not GPU-abuse or
    // persistence patterns (an executable in /tmp is not a miner's name).
    const std::string name = path.substr(path.rfind('/') + 1);
    // A library's own name: libxmrig-cuda.so.6 is xmrig-cuda.
    std::string stem = name.starts_with("lib") ? name.substr(3) : name;
    stem = stem.substr(0, stem.find(".so"));
    for (const std::string& text : {name, stem, path}) {
        // A copy: a lookup may clear the cache the answer lives in.
        const std::vector<std::string_view> ids = match_cached(signatures::Field::kProcess, text);
        for (std::string_view id : ids) {
            const rules::EffectiveSignature* effective = signature(id);
            if (!effective || id.starts_with("GG-GPUABUSE-") || id.starts_with("GG-PERSIST-") ||
                effective->signature.confidence < 0.7) {
                continue;
            }
            return std::string(id);
        }
    }
    return "";
}

std::vector<InjectedLibrary> CorrelatorImpl::judge_libraries(const ProcessEnv& env) {
    const bool facts = !env.loader_paths.empty();
    const std::vector<LoaderPath> entries = facts ? env.loader_paths : loader_entries(env);
    std::vector<InjectedLibrary> out;
    for (const LoaderPath& entry : entries) {
        // A relative directory is the working directory's; what it resolved
        // to (facts) is judged, else its spelling.
        const std::string where = entry.resolved.empty() ? normal_path(entry.path) : entry.resolved;
        const bool missing = facts && entry.resolved.empty();
        // An AppImage's mount or a PyInstaller/Nuitka/Ollama unpack directory
        // is its program's own library path, not a temporary location.
        const bool look_alike = rules::temporary_look_alike(where);
        if (look_alike && !entry.others_can_write) continue;
        const bool temporary = rules::temporary_path(where) && !look_alike;
        if (!temporary) {
            // What does not exist loads nothing; what root's directories,
            // a package or an environment hold is theirs.
            if (missing) continue;
            const bool vouched = system_library_dir(where) || !entry.vouched_by.empty() ||
                                 (!facts && (deployment_dir(where) || environment_by_name(where)));
            if (vouched && !entry.others_can_write) continue;
            // An image's own directory, unless written just now.
            const bool old = entry.age_s > kRecentSeconds;
            if (deployment_dir(where) && old && !entry.others_can_write) continue;
        }
        InjectedLibrary injected{entry.variable,
                                 entry.path,
                                 where,
                                 {},
                                 {},
                                 entry.variable == "LD_PRELOAD" && !entry.resolved.empty()};
        if (temporary) injected.signs.push_back(LibrarySign::kTemporary);
        if (entry.age_s >= 0 && entry.age_s <= kRecentSeconds) {
            injected.signs.push_back(LibrarySign::kRecent);
        }
        if (entry.others_can_write) injected.signs.push_back(LibrarySign::kOthersCanWrite);
        const std::string signature = miner_signature_of(where);
        if (!signature.empty()) injected.signs.push_back(LibrarySign::kMinerSignature);
        injected.detail = entry.variable + " " + entry.path;
        if (!entry.resolved.empty() && entry.resolved != entry.path) {
            injected.detail += " -> " + entry.resolved;
        }
        std::vector<std::string> notes;
        for (LibrarySign sign : injected.signs) {
            notes.push_back(sign_text(sign, entry) +
                            (sign == LibrarySign::kMinerSignature ? " (" + signature + ")" : ""));
        }
        notes.push_back(entry.vouched_by.empty() ? "nothing vouches for it"
                                                 : "vouched for by " + entry.vouched_by);
        injected.detail += " (" + join(notes, "; ") + ")";
        out.push_back(std::move(injected));
    }
    return out;
}

}  // namespace gpuguard::agent
