#include "gpuguard/state/gpu_libraries.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_set>

#include "gpuguard/common/read_file.h"

namespace gpuguard::agent {
namespace {

enum class Part { kDriver, kCompiler, kRuntime, kMl, kGraphics };

struct Known {
    std::string_view prefix;  // of the basename
    Part part;
    std::string_view framework;  // for kMl: its name in the evidence
};

// From each project's own packaging: NVIDIA's CUDA toolkit and driver
// packages (libcuda1, libnvrtc12, libcublas12, libcudnn9, libnccl2), PyTorch
// wheels (torch/lib/libtorch_cuda.so, libc10_cuda.so), TensorFlow
// (libtensorflow_framework.so, _pywrap_tensorflow_internal.so), jaxlib
// (xla_extension.so), ONNX Runtime (libonnxruntime_providers_cuda.so),
// TensorRT (libnvinfer.so), RAPIDS (libcudf.so, libcuml++.so), llama.cpp/ollama (libggml-cuda.so,
// libggml-hip.so), ROCm (libhsa-runtime64, libamdhip64, librocblas,
// libMIOpen, librccl, libhiprtc), Intel (libze_loader, libigdrcl), Khronos
// (libOpenCL, libvulkan), GL vendor libraries (libGLX_nvidia, libEGL).
constexpr Known kKnown[] = {
    {"libcuda.so", Part::kDriver, ""},
    {"libnvidia-ptxjitcompiler", Part::kDriver, ""},
    {"libhsa-runtime64", Part::kDriver, ""},
    {"libOpenCL.so", Part::kDriver, ""},
    {"libnvidia-opencl", Part::kDriver, ""},
    {"libze_loader", Part::kDriver, ""},
    {"libigdrcl", Part::kDriver, ""},
    {"libnvrtc", Part::kCompiler, ""},
    {"libhiprtc", Part::kCompiler, ""},
    {"libamd_comgr", Part::kCompiler, ""},
    {"libcudart", Part::kRuntime, ""},
    {"libamdhip64", Part::kRuntime, ""},
    {"libtorch_cuda", Part::kMl, "PyTorch"},
    {"libtorch_hip", Part::kMl, "PyTorch"},
    {"libc10_cuda", Part::kMl, "PyTorch"},
    {"libtensorflow", Part::kMl, "TensorFlow"},
    {"_pywrap_tensorflow", Part::kMl, "TensorFlow"},
    {"xla_extension", Part::kMl, "JAX"},
    {"libonnxruntime", Part::kMl, "ONNX Runtime"},
    {"libnvinfer", Part::kMl, "TensorRT"},
    {"libggml", Part::kMl, "ggml"},
    {"libllama", Part::kMl, "ggml"},
    {"libcublas", Part::kMl, "cuBLAS"},
    {"libcudnn", Part::kMl, "cuDNN"},
    {"libnccl", Part::kMl, "NCCL"},
    {"libcufft", Part::kMl, "cuFFT"},
    {"libcusparse", Part::kMl, "cuSPARSE"},
    {"libcusolver", Part::kMl, "cuSOLVER"},
    {"librocblas", Part::kMl, "rocBLAS"},
    {"libhipblas", Part::kMl, "hipBLAS"},
    {"libMIOpen", Part::kMl, "MIOpen"},
    // RAPIDS (libcudf, libcuml wheels and conda packages): GPU dataframes
    // and classical ML, whose hash joins and group-bys are integer bound.
    {"libcudf", Part::kMl, "RAPIDS cuDF"},
    {"libcuml", Part::kMl, "RAPIDS cuML"},
    {"librccl", Part::kMl, "RCCL"},
    {"libvulkan", Part::kGraphics, ""},
    {"libGLX_nvidia", Part::kGraphics, ""},
    {"libEGL", Part::kGraphics, ""},
    {"libGL.so", Part::kGraphics, ""},
    {"libnvidia-glcore", Part::kGraphics, ""},
};

const Known* known(std::string_view path) {
    const size_t slash = path.rfind('/');
    const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
    for (const Known& entry : kKnown) {
        if (base.starts_with(entry.prefix)) return &entry;
    }
    return nullptr;
}

}  // namespace

std::vector<std::string> gpu_library_paths(std::string_view maps) {
    std::vector<std::string> paths;
    std::unordered_set<std::string_view> seen;
    while (!maps.empty()) {
        const size_t end = std::min(maps.find('\n'), maps.size());
        const std::string_view line = maps.substr(0, end);
        maps.remove_prefix(std::min(end + 1, maps.size()));
        // address perms offset dev inode   pathname: the path starts at the first '/'.
        const size_t path_at = line.find('/');
        if (path_at == std::string_view::npos) continue;
        std::string_view path = line.substr(path_at);
        if (path.ends_with(" (deleted)")) path.remove_suffix(10);
        if (!known(path) || !seen.insert(path).second) continue;
        paths.emplace_back(path);
    }
    return paths;
}

GpuLibraries classify_gpu_libraries(std::vector<std::string> paths) {
    GpuLibraries found;
    bool driver = false, compiler = false, runtime = false, graphics = false;
    for (const std::string& path : paths) {
        const Known* entry = known(path);
        if (!entry) continue;
        driver |= entry->part == Part::kDriver;
        compiler |= entry->part == Part::kCompiler;
        runtime |= entry->part == Part::kRuntime;
        graphics |= entry->part == Part::kGraphics;
        if (entry->part == Part::kMl && std::find(found.frameworks.begin(), found.frameworks.end(),
                                                  entry->framework) == found.frameworks.end()) {
            found.frameworks.emplace_back(entry->framework);
        }
    }
    found.stack = !found.frameworks.empty() ? "ml_framework"
                  : graphics                ? "graphics"
                  : compiler || runtime     ? "runtime_only"
                  : driver                  ? "driver_only"
                                            : "none";
    found.libraries = std::move(paths);
    return found;
}

GpuLibraries read_gpu_libraries(uint32_t pid, const std::string& proc_root) {
    const std::string path = proc_root + "/" + std::to_string(pid) + "/maps";
    auto text = read_file(path);
    if (!text) {
        GpuLibraries failed;
        failed.stack = "none";
        failed.error = text.error().message;
        return failed;
    }
    return classify_gpu_libraries(gpu_library_paths(*text));
}

}  // namespace gpuguard::agent
