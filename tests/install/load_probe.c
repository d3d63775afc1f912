// SPDX-License-Identifier: Apache-2.0
/* load_probe: opens the nccl-mesh plugin the way NCCL or RCCL does and makes the first calls a
 * communicator makes, to check an installed copy (tests/install/install_test.sh).
 *
 *   load_probe nccl VALUE   as NCCL 2.28 with NCCL_NET_PLUGIN=VALUE: dlopen(VALUE), then, if
 *                           that fails and VALUE has no '/' and is not lib*.so,
 *                           dlopen("libnccl-net-VALUE.so")
 *   load_probe rccl VALUE   as RCCL: the same with dlopen("librccl-net-VALUE.so")
 *   load_probe nccl|rccl VALUE warn
 *                           also asks for the properties of a device that does not exist, so
 *                           the plugin logs one WARN through the logger (printed with NCCL's
 *                           file:line): the installed library must name its source file
 *                           relative to the source tree (-ffile-prefix-map)
 *
 * Both use RTLD_NOW | RTLD_LOCAL, as NCCL does. Then: ncclNetPlugin_v11, _v10, _v9 and _v8 must
 * all be exported with the name "Mesh"; v11's init() gets a real (no-op) logger, devices() must
 * report at least one device, and finalize() closes the context. Prints key=value lines (name
 * opened, file loaded, device count) and exits 0 on success, 1 otherwise.
 *
 * The table layout is declared here (the leading members of ncclNet_v11_t up to finalize, as in
 * NCCL 2.28's net_v11.h) so the probe depends on no header of the plugin.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int result_t; /* ncclResult_t: 0 = ncclSuccess */
typedef void (*logger_t)(int level, unsigned long flags, const char* file, int line,
                         const char* fmt, ...);
typedef struct {
  int trafficClass;
} comm_config_t;
typedef void (*unused_fn_t)(void);

typedef struct {
  const char* name;
  result_t (*init)(void** ctx, uint64_t commId, comm_config_t* config, logger_t logFunction,
                   void* profFunction);
  result_t (*devices)(int* ndev);
  /* The properties struct is not declared here: the call fails before writing to it. */
  result_t (*getProperties)(int dev, void* props);
  /* listen .. makeVDevice: 16 members the probe does not call */
  unused_fn_t unused[16];
  result_t (*finalize)(void* ctx);
} net_v11_t;

/* Every table version starts with the name. */
typedef struct {
  const char* name;
} net_any_t;

static int g_warnings;

/* NCCL hands init() its logger; the plugin calls it with printf-style arguments. Level 2 is
 * NCCL_LOG_WARN: shown (and counted), the rest dropped. */
static void probe_logger(int level, unsigned long flags, const char* file, int line,
                         const char* fmt, ...) {
  (void)flags;
  if (level != 2) return;
  ++g_warnings;
  fprintf(stderr, "plugin WARN %s:%d ", file != NULL ? file : "?", line);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static void* try_open(const char* name) {
  void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (lib != NULL) {
    printf("opened=%s\n", name);
  } else {
    printf("tried=%s (%s)\n", name, dlerror());
  }
  return lib;
}

static int is_lib_so(const char* v) {
  size_t n = strlen(v);
  return strncmp(v, "lib", 3) == 0 && n > 3 && strcmp(v + n - 3, ".so") == 0;
}

int main(int argc, char** argv) {
  if ((argc != 3 && !(argc == 4 && strcmp(argv[3], "warn") == 0)) ||
      (strcmp(argv[1], "nccl") != 0 && strcmp(argv[1], "rccl") != 0)) {
    fprintf(stderr, "usage: %s nccl|rccl NCCL_NET_PLUGIN-value [warn]\n", argv[0]);
    return 2;
  }
  const int rccl = strcmp(argv[1], "rccl") == 0;
  const char* value = argv[2];
  void* lib = try_open(value);
  if (lib == NULL && strchr(value, '/') == NULL && !is_lib_so(value)) {
    char name[512];
    snprintf(name, sizeof name, "%s-net-%s.so", rccl ? "librccl" : "libnccl", value);
    lib = try_open(name);
  }
  if (lib == NULL) {
    printf("FAIL: plugin not found\n");
    return 1;
  }

  const char* versions[] = {"ncclNetPlugin_v11", "ncclNetPlugin_v10", "ncclNetPlugin_v9",
                            "ncclNetPlugin_v8"};
  for (size_t i = 0; i < sizeof versions / sizeof versions[0]; ++i) {
    const net_any_t* table = (const net_any_t*)dlsym(lib, versions[i]);
    if (table == NULL || table->name == NULL || strcmp(table->name, "Mesh") != 0) {
      printf("FAIL: %s %s\n", versions[i], table == NULL ? "not exported" : "not named Mesh");
      return 1;
    }
    printf("symbol=%s name=%s\n", versions[i], table->name);
  }

  net_v11_t* net = (net_v11_t*)dlsym(lib, "ncclNetPlugin_v11");
  Dl_info info;
  if (dladdr((void*)net, &info) != 0 && info.dli_fname != NULL) {
    printf("file=%s\n", info.dli_fname);
  }
  void* ctx = NULL;
  comm_config_t config = {-1};
  result_t rc = net->init(&ctx, 0x6d657368ULL, &config, probe_logger, NULL);
  if (rc != 0) {
    printf("FAIL: init returned %d\n", rc);
    return 1;
  }
  int ndev = 0;
  rc = net->devices(&ndev);
  printf("devices=%d\n", ndev);
  if (rc != 0 || ndev < 1) {
    printf("FAIL: devices returned %d with %d device(s)\n", rc, ndev);
    return 1;
  }
  if (argc == 4) {
    /* ncclInvalidArgument (4) and exactly one WARN. */
    static char props[4096];
    const int before = g_warnings;
    rc = net->getProperties(ndev, props);
    printf("getProperties(%d)=%d, %d WARN(s)\n", ndev, rc, g_warnings - before);
    if (rc != 4 || g_warnings != before + 1) {
      printf("FAIL: getProperties of device %d: want ncclInvalidArgument and one WARN\n", ndev);
      return 1;
    }
  }
  rc = net->finalize(ctx);
  if (rc != 0) {
    printf("FAIL: finalize returned %d\n", rc);
    return 1;
  }
  printf("OK %s loaded, %d device(s), %d warning(s)\n", argv[1], ndev, g_warnings);
  return 0;
}
