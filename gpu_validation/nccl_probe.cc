// lockstep-nccl-probe: is this machine able to replay counterexamples through NCCL?
// Runs one all-reduce over every visible GPU with seeded data and checks the result exactly.
// Exit codes: 0 works, 1 wrong result or CUDA/NCCL failure, 77 no GPU (skipped).
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

namespace {

bool cuda_ok(cudaError_t status, const char* call, int line) {
  if (status == cudaSuccess) return true;
  std::fprintf(stderr, "nccl_probe.cc:%d: error: %s: %s\n", line, call, cudaGetErrorString(status));
  return false;
}

bool nccl_ok(ncclResult_t status, const char* call, int line) {
  if (status == ncclSuccess) return true;
  std::fprintf(stderr, "nccl_probe.cc:%d: error: %s: %s\n", line, call, ncclGetErrorString(status));
  return false;
}

#define CUDA_OK(call) cuda_ok((call), #call, __LINE__)
#define NCCL_OK(call) nccl_ok((call), #call, __LINE__)

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device visible; nothing to probe\n");
    return 77;
  }
  if (devices > 8) devices = 8;
  int version = 0;
  if (!NCCL_OK(ncclGetVersion(&version))) return 1;
  std::printf("NCCL %d, %d device(s)\n", version, devices);

  constexpr size_t count = 1 << 20;
  std::vector<ncclComm_t> comms(static_cast<size_t>(devices));
  std::vector<int> ids(static_cast<size_t>(devices));
  for (int d = 0; d < devices; ++d) ids[static_cast<size_t>(d)] = d;
  if (!NCCL_OK(ncclCommInitAll(comms.data(), devices, ids.data()))) return 1;

  std::vector<float*> buffers(static_cast<size_t>(devices), nullptr);
  std::vector<cudaStream_t> streams(static_cast<size_t>(devices));
  bool ok = true;
  for (int d = 0; d < devices && ok; ++d) {
    ok = CUDA_OK(cudaSetDevice(d)) && CUDA_OK(cudaMalloc(&buffers[static_cast<size_t>(d)], count * sizeof(float))) &&
         CUDA_OK(cudaStreamCreate(&streams[static_cast<size_t>(d)]));
    // Rank d contributes d + 1 everywhere: the sum is exact in fp32.
    std::vector<float> host(count, static_cast<float>(d + 1));
    ok = ok && CUDA_OK(cudaMemcpy(buffers[static_cast<size_t>(d)], host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  }
  ok = ok && NCCL_OK(ncclGroupStart());
  for (int d = 0; d < devices && ok; ++d) {
    const size_t i = static_cast<size_t>(d);
    ok = NCCL_OK(ncclAllReduce(buffers[i], buffers[i], count, ncclFloat, ncclSum, comms[i], streams[i]));
  }
  ok = ok && NCCL_OK(ncclGroupEnd());
  const float expected = static_cast<float>(devices * (devices + 1) / 2);
  for (int d = 0; d < devices && ok; ++d) {
    const size_t i = static_cast<size_t>(d);
    std::vector<float> host(count);
    ok = CUDA_OK(cudaSetDevice(d)) && CUDA_OK(cudaStreamSynchronize(streams[i])) &&
         CUDA_OK(cudaMemcpy(host.data(), buffers[i], count * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t j = 0; j < count && ok; ++j) {
      if (host[j] != expected) {
        std::fprintf(stderr, "error: device %d element %zu is %g, expected %g\n", d, j, static_cast<double>(host[j]),
                     static_cast<double>(expected));
        ok = false;
      }
    }
  }
  for (int d = 0; d < devices; ++d) {
    const size_t i = static_cast<size_t>(d);
    cudaSetDevice(d);
    if (buffers[i]) cudaFree(buffers[i]);
    if (comms[i]) ncclCommDestroy(comms[i]);
  }
  std::printf(ok ? "PASS: all-reduce over %d device(s) correct\n" : "FAIL: all-reduce over %d device(s)\n", devices);
  return ok ? 0 : 1;
}
