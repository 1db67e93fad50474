// The subset of NVML's C API (nvml.h, CUDA 12.x) that the NVML backend
// resolves with dlsym. Layouts are copied from nvml.h and pinned with
// static_asserts; nothing here links against NVML. The fake NVML built by the
// tests has its own copy, written separately from NVIDIA's documentation
// (tests/backends/fake_nvml/nvml_public.h), so a layout mistake here is
// not mirrored there: the backend tests read wrong values and fail.
#pragma once

#ifdef __cplusplus
#include <cstddef>
#else
#include <stddef.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_UNKNOWN = 999,
};

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

enum { NVML_TEMPERATURE_GPU = 0 };
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
enum { NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1 };
enum { NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1 };
enum { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 };
enum { NVML_PSTATE_UNKNOWN = 32 };
enum { NVML_FI_DEV_MEMORY_TEMP = 82 };
enum {
    NVML_VALUE_TYPE_DOUBLE = 0,
    NVML_VALUE_TYPE_UNSIGNED_INT = 1,
    NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
    NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
    NVML_VALUE_TYPE_SIGNED_INT = 5
};

#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_SERIAL_BUFFER_SIZE 30
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_VALUE_NOT_AVAILABLE_ULL 0xFFFFFFFFFFFFFFFFULL
#define NVML_EVENT_TYPE_SINGLE_BIT_ECC_ERROR 0x0000000000000001ULL
#define NVML_EVENT_TYPE_DOUBLE_BIT_ECC_ERROR 0x0000000000000002ULL
#define NVML_EVENT_TYPE_XID_CRITICAL_ERROR 0x0000000000000008ULL
#define NVML_EVENT_TYPE_CLOCK 0x0000000000000010ULL

// nvmlClocksEventReasons (formerly ClocksThrottleReasons) bits.
#define NVML_CLOCKS_EVENT_REASON_GPU_IDLE 0x1ULL
#define NVML_CLOCKS_EVENT_REASON_APPLICATIONS_CLOCKS_SETTING 0x2ULL
#define NVML_CLOCKS_EVENT_REASON_SW_POWER_CAP 0x4ULL
#define NVML_CLOCKS_EVENT_REASON_HW_SLOWDOWN 0x8ULL
#define NVML_CLOCKS_EVENT_REASON_SYNC_BOOST 0x10ULL
#define NVML_CLOCKS_EVENT_REASON_SW_THERMAL_SLOWDOWN 0x20ULL
#define NVML_CLOCKS_EVENT_REASON_HW_THERMAL_SLOWDOWN 0x40ULL
#define NVML_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN 0x80ULL
#define NVML_CLOCKS_EVENT_REASON_DISPLAY_CLOCK_SETTING 0x100ULL

typedef struct nvmlUtilization_st {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlPciInfo_st {
    char busIdLegacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

// nvmlProcessInfo_v2_t: the layout of the _v2 and _v3 process queries.
typedef struct nvmlProcessInfo_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;  // NVML_VALUE_NOT_AVAILABLE_ULL when unknown
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef struct nvmlProcessUtilizationSample_st {
    unsigned int pid;
    unsigned long long timeStamp;  // CPU time in microseconds
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef union nvmlValue_st {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;  // the Xid for NVML_EVENT_TYPE_XID_CRITICAL_ERROR
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

// GPM (nvml.h, CUDA 12.x): nvmlGpmSampleAlloc/Free/Get, nvmlGpmMetricsGet,
// nvmlGpmQueryDeviceSupport. Metric values are percent.
typedef struct nvmlGpmSample_st* nvmlGpmSample_t;
enum {
    NVML_GPM_METRIC_SM_UTIL = 2,
    NVML_GPM_METRIC_SM_OCCUPANCY = 3,
    NVML_GPM_METRIC_INTEGER_UTIL = 4,
    NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,
    NVML_GPM_METRIC_DRAM_BW_UTIL = 10,
    NVML_GPM_METRIC_FP64_UTIL = 11,
    NVML_GPM_METRIC_FP32_UTIL = 12,
    NVML_GPM_METRIC_FP16_UTIL = 13,
};
#define NVML_GPM_METRIC_MAX 98
#define NVML_GPM_METRICS_GET_VERSION 1
#define NVML_GPM_SUPPORT_VERSION 1

typedef struct nvmlGpmMetric_st {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    struct {
        char* shortName;
        char* longName;
        char* unit;
    } metricInfo;
} nvmlGpmMetric_t;

typedef struct nvmlGpmMetricsGet_st {
    unsigned int version;
    unsigned int numMetrics;
    nvmlGpmSample_t sample1;
    nvmlGpmSample_t sample2;
    nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

typedef struct nvmlGpmSupport_st {
    unsigned int version;
    unsigned int isSupportedDevice;
} nvmlGpmSupport_t;

#ifdef __cplusplus
static_assert(sizeof(nvmlGpmMetric_t) == 40);
static_assert(offsetof(nvmlGpmMetricsGet_t, metrics) == 24);
static_assert(sizeof(nvmlGpmMetricsGet_t) == 3944);
static_assert(sizeof(nvmlGpmSupport_t) == 8);
#endif

#ifdef __cplusplus
static_assert(sizeof(nvmlUtilization_t) == 8);
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_v2_t is 24 bytes");
static_assert(offsetof(nvmlProcessInfo_t, usedGpuMemory) == 8);
static_assert(offsetof(nvmlProcessInfo_t, gpuInstanceId) == 16);
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32);
static_assert(sizeof(nvmlFieldValue_t) == 40);
static_assert(sizeof(nvmlEventData_t) == 32);
}  // extern "C"
#endif
