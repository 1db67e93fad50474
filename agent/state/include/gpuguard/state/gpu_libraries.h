// Which GPU software a process runs on, from the files it has mapped
// (/proc/PID/maps): the driver's user-space library (libcuda, ROCm's HSA
// runtime, an OpenCL ICD, Level Zero), runtime compilers (NVRTC, hipRTC),
// ML stacks (PyTorch's libtorch_cuda, TensorFlow, JAX's XLA, ONNX Runtime,
// TensorRT, llama.cpp's ggml, cuBLAS/cuDNN/NCCL, rocBLAS/MIOpen/RCCL) and
// graphics APIs (Vulkan, OpenGL/EGL). A miner's kernels need the driver and
// perhaps a runtime compiler, nothing else; training and inference map an
// ML stack (docs/detections.md, "GPU software"). Names by basename, so a
// conda or pip environment's copies count like the system's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/events/event.h"

namespace gpuguard::agent {

// The GPU-related paths of a maps file's contents, in order, each once.
std::vector<std::string> gpu_library_paths(std::string_view maps);

// The stack `paths` make (GpuLibraries without error).
GpuLibraries classify_gpu_libraries(std::vector<std::string> paths);

// Both, for a live process: error set when its maps cannot be read.
GpuLibraries read_gpu_libraries(uint32_t pid, const std::string& proc_root = "/proc");

}  // namespace gpuguard::agent
