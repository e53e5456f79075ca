#include "vk_context.h"

#include <cstdlib>
#include <string>

#include "nightlora/util/error.h"

namespace nl::vk {
namespace {

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    default: return "VkResult error";
  }
}

VkInstance create_instance() {
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "nightlora";
  app.pEngineName = "nightlora";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  VkResult r = vkCreateInstance(&ci, nullptr, &instance);
  if (r != VK_SUCCESS)
    fail("Vulkan", std::string("cannot create a Vulkan instance (") + result_name(r) + ")",
         "install a Vulkan driver: a GPU vendor's, or Mesa's software one (Debian: mesa-vulkan-drivers), "
         "or use --engine cpu");
  return instance;
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance instance) {
  uint32_t n = 0;
  if (vkEnumeratePhysicalDevices(instance, &n, nullptr) != VK_SUCCESS) return {};
  std::vector<VkPhysicalDevice> devs(n);
  if (n > 0 && vkEnumeratePhysicalDevices(instance, &n, devs.data()) != VK_SUCCESS) return {};
  devs.resize(n);
  return devs;
}

// A queue family with compute, preferring one without graphics (a dedicated compute queue).
bool find_compute_family(VkPhysicalDevice dev, uint32_t& family) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(dev, &n, nullptr);
  std::vector<VkQueueFamilyProperties> fams(n);
  vkGetPhysicalDeviceQueueFamilyProperties(dev, &n, fams.data());
  bool found = false;
  for (uint32_t i = 0; i < n; ++i) {
    if (!(fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (!found || !(fams[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) family = i;
    if (!(fams[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) return true;
    found = true;
  }
  return found;
}

DeviceInfo describe(VkPhysicalDevice dev, uint32_t index) {
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(dev, &props);
  DeviceInfo d;
  d.index = index;
  d.name = props.deviceName;
  d.type = props.deviceType;
  uint32_t family = 0;
  d.has_compute_queue = find_compute_family(dev, family);
  return d;
}

int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

std::string device_list_text(const std::vector<DeviceInfo>& infos) {
  std::string s;
  for (const DeviceInfo& d : infos)
    s += (s.empty() ? "" : ", ") + std::to_string(d.index) + ": " + d.name + " (" + device_type_name(d.type) + ")";
  return s.empty() ? "none" : s;
}

}  // namespace

void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) fail("Vulkan", std::string(what) + " failed: " + result_name(r));
}

const char* device_type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

std::vector<DeviceInfo> Context::list_devices() {
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  if (vkCreateInstance(&ci, nullptr, &instance) != VK_SUCCESS) return {};
  std::vector<DeviceInfo> out;
  const auto devs = physical_devices(instance);
  for (uint32_t i = 0; i < devs.size(); ++i) out.push_back(describe(devs[i], i));
  vkDestroyInstance(instance, nullptr);
  return out;
}

Context::Context() {
  instance_ = create_instance();
  try {
    const auto devs = physical_devices(instance_);
    std::vector<DeviceInfo> infos;
    for (uint32_t i = 0; i < devs.size(); ++i) infos.push_back(describe(devs[i], i));
    int chosen = -1;
    if (const char* env = std::getenv("NL_VULKAN_DEVICE"); env && *env) {
      char* end = nullptr;
      const long idx = std::strtol(env, &end, 10);
      if (*end != '\0' || idx < 0 || idx >= static_cast<long>(infos.size()))
        fail("NL_VULKAN_DEVICE=" + std::string(env), "not the index of a Vulkan device",
             "devices: " + device_list_text(infos));
      if (!infos[static_cast<size_t>(idx)].has_compute_queue)
        fail("NL_VULKAN_DEVICE=" + std::string(env), "this device has no compute queue",
             "devices: " + device_list_text(infos));
      chosen = static_cast<int>(idx);
    } else {
      for (const DeviceInfo& d : infos)
        if (d.has_compute_queue && (chosen < 0 || type_rank(d.type) < type_rank(infos[static_cast<size_t>(chosen)].type)))
          chosen = static_cast<int>(d.index);
    }
    if (chosen < 0)
      fail("Vulkan", "no Vulkan device with a compute queue (devices: " + device_list_text(infos) + ")",
           "install a Vulkan driver (Debian: mesa-vulkan-drivers gives the lavapipe software device) or use --engine cpu");
    physical_ = devs[static_cast<size_t>(chosen)];
    info_ = infos[static_cast<size_t>(chosen)];
    find_compute_family(physical_, queue_family_);
    vkGetPhysicalDeviceProperties(physical_, &props_);
    vkGetPhysicalDeviceMemoryProperties(physical_, &mem_props_);

    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical_, &n, nullptr);
    std::vector<VkQueueFamilyProperties> fams(n);
    vkGetPhysicalDeviceQueueFamilyProperties(physical_, &n, fams.data());
    const uint32_t valid_bits = fams[queue_family_].timestampValidBits;
    if (valid_bits > 0) {
      timestamp_period_ns_ = props_.limits.timestampPeriod;
      timestamp_mask_ = valid_bits >= 64 ? ~uint64_t{0} : ((uint64_t{1} << valid_bits) - 1);
    }

    const float priority = 1.0f;
    VkDeviceQueueCreateInfo qci{};
    qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    qci.queueFamilyIndex = queue_family_;
    qci.queueCount = 1;
    qci.pQueuePriorities = &priority;
    VkDeviceCreateInfo dci{};
    dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    check(vkCreateDevice(physical_, &dci, nullptr, &device_), "vkCreateDevice");
    vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
  } catch (...) {
    if (device_) vkDestroyDevice(device_, nullptr);
    vkDestroyInstance(instance_, nullptr);
    throw;
  }
}

Context::~Context() {
  if (device_) vkDestroyDevice(device_, nullptr);
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

Buffer Context::make_buffer(VkDeviceSize size, VkBufferUsageFlags usage, VkMemoryPropertyFlags want,
                            VkMemoryPropertyFlags fallback) {
  Buffer b;
  b.size = size;
  VkBufferCreateInfo bci{};
  bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bci.size = size;
  bci.usage = usage;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(device_, &bci, nullptr, &b.buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  int type = -1;
  for (VkMemoryPropertyFlags flags : {want, fallback}) {
    for (uint32_t i = 0; i < mem_props_.memoryTypeCount && type < 0; ++i)
      if ((req.memoryTypeBits & (1u << i)) && (mem_props_.memoryTypes[i].propertyFlags & flags) == flags)
        type = static_cast<int>(i);
    if (type >= 0) break;
  }
  if (type < 0) {
    vkDestroyBuffer(device_, b.buffer, nullptr);
    fail("Vulkan", "no suitable memory type for a buffer of " + std::to_string(size) + " bytes");
  }
  VkMemoryAllocateInfo mai{};
  mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = static_cast<uint32_t>(type);
  VkResult r = vkAllocateMemory(device_, &mai, nullptr, &b.memory);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(device_, b.buffer, nullptr);
    check(r, ("vkAllocateMemory of " + std::to_string(size) + " bytes").c_str());
  }
  check(vkBindBufferMemory(device_, b.buffer, b.memory, 0), "vkBindBufferMemory");
  if (mem_props_.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)
    check(vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped), "vkMapMemory");
  return b;
}

Buffer Context::make_device_buffer(VkDeviceSize size, VkBufferUsageFlags extra_usage) {
  return make_buffer(size,
                     VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                         VK_BUFFER_USAGE_TRANSFER_SRC_BIT | extra_usage,
                     VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
}

Buffer Context::make_host_buffer(VkDeviceSize size, bool readback) {
  const VkMemoryPropertyFlags base = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  return make_buffer(size, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                     readback ? base | VK_MEMORY_PROPERTY_HOST_CACHED_BIT : base, base);
}

void Context::destroy(Buffer& b) {
  if (b.mapped) vkUnmapMemory(device_, b.memory);
  if (b.buffer) vkDestroyBuffer(device_, b.buffer, nullptr);
  if (b.memory) vkFreeMemory(device_, b.memory, nullptr);
  b = Buffer{};
}

}  // namespace nl::vk
