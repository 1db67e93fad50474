// The GPU software stack from a process's maps (gpuguard/state/gpu_libraries.h):
// which mapped files count, in which stack, from maps lines as the kernel
// writes them (a PyTorch training job, an XMRig CUDA plugin, hashcat's
// OpenCL, a Vulkan game), and a process whose maps cannot be read.
#include "gpuguard/state/gpu_libraries.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace gpuguard::agent {
namespace {

std::string line(const std::string& path) {
    return "7f1c2a000000-7f1c2a200000 r-xp 00000000 fd:01 1234567                    " + path +
           "\n";
}

TEST(GpuLibraries, PyTorchTrainingMapsAnMlStack) {
    const std::string maps =
        "55d0c0a00000-55d0c0a21000 r--p 00000000 fd:01 42    /usr/bin/python3.11\n" +
        line("/opt/conda/lib/python3.11/site-packages/torch/lib/libc10_cuda.so") +
        line("/opt/conda/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so") +
        line("/opt/conda/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12") +
        line("/opt/conda/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9") +
        line("/opt/conda/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so") +  // again
        line("/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15") +
        "7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0                          [stack]\n";
    const auto paths = gpu_library_paths(maps);
    ASSERT_EQ(paths.size(), 5u);
    EXPECT_EQ(paths.front(), "/opt/conda/lib/python3.11/site-packages/torch/lib/libc10_cuda.so");
    const auto found = classify_gpu_libraries(paths);
    EXPECT_EQ(found.stack, "ml_framework");
    EXPECT_EQ(found.frameworks, (std::vector<std::string>{"PyTorch", "cuBLAS", "cuDNN"}));
    EXPECT_EQ(found.libraries.size(), 5u);
}

TEST(GpuLibraries, AMinersCudaPluginIsTheDriverAndARuntimeCompilerOnly) {
    const std::string maps = line("/tmp/.x/libxmrig-cuda.so") +
                             line("/usr/lib/x86_64-linux-gnu/libcuda.so.1 (deleted)") +
                             line("/tmp/.x/libnvrtc.so.12") +
                             line("/tmp/.x/libnvrtc-builtins.so.12.4");
    const auto found = classify_gpu_libraries(gpu_library_paths(maps));
    EXPECT_EQ(found.stack, "runtime_only");
    EXPECT_TRUE(found.frameworks.empty());
    EXPECT_EQ(found.libraries, (std::vector<std::string>{"/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                                                         "/tmp/.x/libnvrtc.so.12",
                                                         "/tmp/.x/libnvrtc-builtins.so.12.4"}));
    // The driver alone: a miner with its kernels built in (cubin, PTX JIT).
    EXPECT_EQ(classify_gpu_libraries({"/usr/lib/libcuda.so.1"}).stack, "driver_only");
    EXPECT_EQ(classify_gpu_libraries({"/usr/lib/libOpenCL.so.1"}).stack, "driver_only");
}

TEST(GpuLibraries, GraphicsAndNothingAtAll) {
    EXPECT_EQ(classify_gpu_libraries({"/usr/lib/libvulkan.so.1", "/usr/lib/libGLX_nvidia.so.0",
                                      "/usr/lib/libcuda.so.1"})
                  .stack,
              "graphics");
    EXPECT_EQ(classify_gpu_libraries({}).stack, "none");
    EXPECT_TRUE(gpu_library_paths("").empty());
    // Only libcuda.so* is the driver: a library whose name merely starts alike is not.
    EXPECT_TRUE(
        gpu_library_paths(line("/usr/lib/libcudacpp.so") + line("/usr/lib/libc.so.6")).empty());
}

TEST(GpuLibraries, AGoneProcessSaysWhy) {
    const auto found = read_gpu_libraries(4'000'000'000u, "/proc");
    EXPECT_EQ(found.stack, "none");
    EXPECT_NE(found.error.find("/proc/4000000000/maps"), std::string::npos) << found.error;
    // This test's own maps: no GPU library.
    const auto self = read_gpu_libraries(static_cast<uint32_t>(getpid()));
    EXPECT_EQ(self.error, "");
    EXPECT_EQ(self.stack, "none");
}

}  // namespace
}  // namespace gpuguard::agent
