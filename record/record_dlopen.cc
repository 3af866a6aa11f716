// lockstep_record_dlopen PLUGIN ARGS...: loads PLUGIN (record_demo_plugin.so) with RTLD_LOCAL, as
// Python loads an extension module such as PyTorch's, and runs its lockstep_record_demo_main
// with ARGS. The plugin's libnccl is then private to it: the recorder must still find it.

#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: lockstep_record_dlopen PLUGIN MODE [ARGS...]\n");
    return 2;
  }
  void* plugin = ::dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (plugin == nullptr) {
    std::fprintf(stderr, "lockstep_record_dlopen: %s\n", ::dlerror());
    return 2;
  }
  using Main = int(int, char**);
  auto* entry = reinterpret_cast<Main*>(::dlsym(plugin, "lockstep_record_demo_main"));
  if (entry == nullptr) {
    std::fprintf(stderr, "lockstep_record_dlopen: %s\n", ::dlerror());
    return 2;
  }
  return entry(argc - 1, argv + 1);
}
