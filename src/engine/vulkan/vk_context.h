// The Vulkan objects one engine needs, with their lifetimes tied to C++ objects: the
// instance, the chosen physical device, a logical device with one compute queue, and device
// buffers (with their memory). Errors become nl::Error naming the call and the VkResult.
#pragma once
#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nl::vk {

// Throws nl::Error "<what>: <VkResult name>" unless r is VK_SUCCESS.
void check(VkResult r, const char* what);

// One physical device as the loader lists it.
struct DeviceInfo {
  uint32_t index = 0;
  std::string name;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  bool has_compute_queue = false;
};
const char* device_type_name(VkPhysicalDeviceType t);  // "discrete GPU", "cpu", ...

// A buffer and its memory. `mapped` is set for host-visible buffers (mapped for life).
struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize size = 0;
  void* mapped = nullptr;
};

class Context {
 public:
  // Creates the instance and picks a device: $NL_VULKAN_DEVICE (an index into the loader's
  // list) when set, otherwise the first discrete GPU, else integrated, else virtual, else a
  // CPU implementation (lavapipe). Throws nl::Error when there is no device with a compute
  // queue, saying what to install.
  Context();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Lists the devices without creating a logical device (for --engine auto and messages).
  // Empty when there is no loader driver at all; never throws.
  static std::vector<DeviceInfo> list_devices();

  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  const VkPhysicalDeviceProperties& properties() const { return props_; }
  const DeviceInfo& info() const { return info_; }
  // Nanoseconds per timestamp tick, 0 when the queue cannot write timestamps.
  double timestamp_period_ns() const { return timestamp_period_ns_; }
  uint64_t timestamp_mask() const { return timestamp_mask_; }

  // Device-local storage buffer (falls back to any memory type the device offers).
  Buffer make_device_buffer(VkDeviceSize size, VkBufferUsageFlags extra_usage = 0);
  // Host-visible, coherent, mapped buffer; `readback` prefers cached memory (fast to read).
  Buffer make_host_buffer(VkDeviceSize size, bool readback);
  void destroy(Buffer& b);

 private:
  Buffer make_buffer(VkDeviceSize size, VkBufferUsageFlags usage, VkMemoryPropertyFlags want,
                     VkMemoryPropertyFlags fallback);

  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkPhysicalDeviceProperties props_{};
  VkPhysicalDeviceMemoryProperties mem_props_{};
  DeviceInfo info_;
  double timestamp_period_ns_ = 0;
  uint64_t timestamp_mask_ = 0;
};

}  // namespace nl::vk
