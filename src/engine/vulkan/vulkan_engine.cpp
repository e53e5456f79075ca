// The Vulkan backend of the frozen engine: the three frozen products run as compute shaders on
// a Vulkan device (a GPU; in CI Mesa's lavapipe) while the host keeps the training graph.
//
// Load: every matrix is packed once into its device layout (device_layout.h) and uploaded to
// its own device-local buffer; nothing else of the weights stays on the device or is ever
// transposed. The mapped file pages are then handed back to the kernel (as the cpu backend
// does), so the weights are resident once, on the device.
//
// A product is recorded into one command buffer of a "slot" and submitted with a fence:
//   copy X to the device -> [F16: X to halves, per row | Int8 forward: quantize X per 32-block]
//   -> forward or input-grad shader -> [F16: round Y per row] -> copy Y back,
// bracketed by two timestamp queries (its device time). Slots form a ring (kSlots), each
// with its own staging/activation buffers that grow to the largest product seen and are
// reused for the rest of the run; submit() returns at once, so up to kSlots products are in
// flight while the host works. wait(t) completes products in ticket order: it waits for the
// fence and copies the result into the caller's output (which is why outputs must stay valid
// until wait() returns).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "../backends.h"
#include "device_layout.h"
#include "nightlora/util/error.h"
#include "vk_context.h"

namespace nl {
namespace {

const uint32_t kForwardSpv[] = {
#include "forward.spv.inc"
};
const uint32_t kInputGradSpv[] = {
#include "input_grad.spv.inc"
};
const uint32_t kGuardF16Spv[] = {
#include "guard_f16.spv.inc"
};
const uint32_t kQuantizeQ8Spv[] = {
#include "quantize_q8.spv.inc"
};

// Same order as shaders/params.glsl.
struct Params {
  uint32_t wtype, rows, cols, n_blocks, T, mode, len, target;
};

constexpr int kSlots = 6;        // products in flight at once (the step submits up to 3 before waiting)
constexpr uint32_t kBindings = 5;  // weights, input, output, int8 activations, their scales
// Output tiles of one workgroup (forward.comp: TILE_ROWS x TILE_TOKENS; input_grad.comp:
// 32 columns x TILE_TOKENS) and the workgroup size of the row passes.
constexpr uint32_t kForwardTileRows = 32, kTileTokens = 32, kTileCols = 32, kRowPassGroup = 64;

struct VulkanResidentMatrix {
  vk::DeviceWeightType type = vk::DeviceWeightType::F32;
  int64_t rows = 0, cols = 0, n_blocks = 0;
  vk::Buffer buffer;
};

// A buffer of the slot ring that grows to the largest size asked for and is then reused.
struct GrowingBuffer {
  vk::Buffer buf;
  bool host = false, readback = false;
  void ensure(vk::Context& ctx, VkDeviceSize bytes) {
    bytes = std::max<VkDeviceSize>(bytes, 16);
    if (buf.size >= bytes) return;
    ctx.destroy(buf);
    // Grow by half again so slowly rising sizes (longer batches) do not reallocate each time.
    const VkDeviceSize size = std::max(bytes, buf.size + buf.size / 2);
    buf = host ? ctx.make_host_buffer(size, readback) : ctx.make_device_buffer(size);
  }
};

struct Slot {
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  VkDescriptorSet set = VK_NULL_HANDLE;
  VkQueryPool queries = VK_NULL_HANDLE;
  GrowingBuffer in_stage, out_stage, in_dev, out_dev, quant_dev, scale_dev;
  bool busy = false;
  bool input_grad = false;
  float* out = nullptr;
  size_t out_bytes = 0;
};

struct Pending {
  EngineTicket ticket;
  int slot;
};

class VulkanEngine final : public FrozenEngine {
 public:
  VulkanEngine(const Model& model, const EngineOptions&) {
    try {
      create_pipelines();
      create_slots();
      n_layer_ = model.config.n_layer;
      if (static_cast<int64_t>(model.weights.layers.size()) != n_layer_)
        fail(model.source_path, "model has " + std::to_string(model.weights.layers.size()) + " layers, config says " +
                                    std::to_string(n_layer_));
      for (int64_t l = 0; l < n_layer_; ++l)
        for (int p = 0; p < kNumProj; ++p) add(model.weights.layers[static_cast<size_t>(l)].proj(static_cast<Proj>(p)));
      add(model.weights.output.present() ? model.weights.output : model.weights.tok_embd);
    } catch (...) {
      release();  // the context (a member) is destroyed after this, with nothing left on it
      throw;
    }
  }

  ~VulkanEngine() override { release(); }

  // Destroys every object made on the device (products still in flight are abandoned).
  void release() {
    VkDevice dev = ctx_.device();
    vkDeviceWaitIdle(dev);
    for (Slot& s : slots_) {
      for (GrowingBuffer* b : {&s.in_stage, &s.out_stage, &s.in_dev, &s.out_dev, &s.quant_dev, &s.scale_dev})
        ctx_.destroy(b->buf);
      if (s.fence) vkDestroyFence(dev, s.fence, nullptr);
      if (s.queries) vkDestroyQueryPool(dev, s.queries, nullptr);
    }
    for (VulkanResidentMatrix& m : mats_) ctx_.destroy(m.buffer);
    if (cmd_pool_) vkDestroyCommandPool(dev, cmd_pool_, nullptr);
    if (desc_pool_) vkDestroyDescriptorPool(dev, desc_pool_, nullptr);
    for (VkPipeline p : {forward_, input_grad_, guard_f16_, quantize_q8_})
      if (p) vkDestroyPipeline(dev, p, nullptr);
    if (pipeline_layout_) vkDestroyPipelineLayout(dev, pipeline_layout_, nullptr);
    if (set_layout_) vkDestroyDescriptorSetLayout(dev, set_layout_, nullptr);
    slots_.clear();
    mats_.clear();
    cmd_pool_ = VK_NULL_HANDLE;
    desc_pool_ = VK_NULL_HANDLE;
    forward_ = input_grad_ = guard_f16_ = quantize_q8_ = VK_NULL_HANDLE;
    pipeline_layout_ = VK_NULL_HANDLE;
    set_layout_ = VK_NULL_HANDLE;
  }

  std::string backend() const override { return "vulkan"; }
  // The host threads this backend uses for products: none (the device runs them).
  int threads() const override { return 1; }
  std::string isa() const override {
    return "vulkan: " + ctx_.info().name + " (" + vk::device_type_name(ctx_.info().type) + ")";
  }

  WeightHandle handle(int64_t layer, Proj p) const override {
    if (layer < 0 || layer >= n_layer_) fail("engine", "layer " + std::to_string(layer) + " out of range");
    return static_cast<WeightHandle>(layer * kNumProj + static_cast<int>(p));
  }
  WeightHandle output_handle() const override { return static_cast<WeightHandle>(n_layer_ * kNumProj); }
  int64_t rows(WeightHandle h) const override { return at(h).rows; }
  int64_t cols(WeightHandle h) const override { return at(h).cols; }

  EngineTicket submit_forward(WeightHandle h, const float* X, int64_t T, float* Y,
                             Precision p = Precision::F32) override {
    return submit(false, at(h), X, T, Y, p);
  }
  EngineTicket submit_input_grad(WeightHandle h, const float* dY, int64_t T, float* dX,
                                 Precision p = Precision::F32) override {
    return submit(true, at(h), dY, T, dX, p);
  }

  void reserve_forward(WeightHandle h, int64_t max_tokens, Precision p) override {
    reserve(false, at(h), max_tokens, p);
  }
  void reserve_input_grad(WeightHandle h, int64_t max_tokens, Precision p) override {
    reserve(true, at(h), max_tokens, p);
  }

  void wait(EngineTicket t) override {
    std::lock_guard<std::mutex> lk(mu_);
    while (!pending_.empty() && pending_.front().ticket <= t) complete_oldest();
  }

  size_t resident_weight_bytes() const override {
    size_t n = 0;
    for (const VulkanResidentMatrix& m : mats_) n += static_cast<size_t>(m.buffer.size);
    return n;
  }
  size_t resident_bytes() const override {
    return resident_weight_bytes() + sizeof(*this) + mats_.capacity() * sizeof(VulkanResidentMatrix);
  }

  EngineDeviceTime device_time() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return device_time_;
  }

 private:
  // ---- setup ----
  VkPipeline make_pipeline(const uint32_t* words, size_t n_bytes) {
    VkShaderModuleCreateInfo smci{};
    smci.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    smci.codeSize = n_bytes;
    smci.pCode = words;
    VkShaderModule module = VK_NULL_HANDLE;
    vk::check(vkCreateShaderModule(ctx_.device(), &smci, nullptr, &module), "vkCreateShaderModule");
    VkComputePipelineCreateInfo pci{};
    pci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    pci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    pci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    pci.stage.module = module;
    pci.stage.pName = "main";
    pci.layout = pipeline_layout_;
    VkPipeline pipeline = VK_NULL_HANDLE;
    VkResult r = vkCreateComputePipelines(ctx_.device(), VK_NULL_HANDLE, 1, &pci, nullptr, &pipeline);
    vkDestroyShaderModule(ctx_.device(), module, nullptr);
    vk::check(r, "vkCreateComputePipelines");
    return pipeline;
  }

  void create_pipelines() {
    VkDescriptorSetLayoutBinding bindings[kBindings]{};
    for (uint32_t i = 0; i < kBindings; ++i) {
      bindings[i].binding = i;
      bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      bindings[i].descriptorCount = 1;
      bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dslci{};
    dslci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
    dslci.bindingCount = kBindings;
    dslci.pBindings = bindings;
    vk::check(vkCreateDescriptorSetLayout(ctx_.device(), &dslci, nullptr, &set_layout_), "vkCreateDescriptorSetLayout");
    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(Params)};
    VkPipelineLayoutCreateInfo plci{};
    plci.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
    plci.setLayoutCount = 1;
    plci.pSetLayouts = &set_layout_;
    plci.pushConstantRangeCount = 1;
    plci.pPushConstantRanges = &range;
    vk::check(vkCreatePipelineLayout(ctx_.device(), &plci, nullptr, &pipeline_layout_), "vkCreatePipelineLayout");
    forward_ = make_pipeline(kForwardSpv, sizeof(kForwardSpv));
    input_grad_ = make_pipeline(kInputGradSpv, sizeof(kInputGradSpv));
    guard_f16_ = make_pipeline(kGuardF16Spv, sizeof(kGuardF16Spv));
    quantize_q8_ = make_pipeline(kQuantizeQ8Spv, sizeof(kQuantizeQ8Spv));
  }

  void create_slots() {
    VkDevice dev = ctx_.device();
    VkCommandPoolCreateInfo cpci{};
    cpci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    cpci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    cpci.queueFamilyIndex = ctx_.queue_family();
    vk::check(vkCreateCommandPool(dev, &cpci, nullptr, &cmd_pool_), "vkCreateCommandPool");
    VkDescriptorPoolSize pool_size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kBindings * kSlots};
    VkDescriptorPoolCreateInfo dpci{};
    dpci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    dpci.maxSets = kSlots;
    dpci.poolSizeCount = 1;
    dpci.pPoolSizes = &pool_size;
    vk::check(vkCreateDescriptorPool(dev, &dpci, nullptr, &desc_pool_), "vkCreateDescriptorPool");
    slots_.resize(kSlots);
    for (Slot& s : slots_) {
      VkCommandBufferAllocateInfo cbai{};
      cbai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
      cbai.commandPool = cmd_pool_;
      cbai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
      cbai.commandBufferCount = 1;
      vk::check(vkAllocateCommandBuffers(dev, &cbai, &s.cmd), "vkAllocateCommandBuffers");
      VkFenceCreateInfo fci{};
      fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
      vk::check(vkCreateFence(dev, &fci, nullptr, &s.fence), "vkCreateFence");
      VkDescriptorSetAllocateInfo dsai{};
      dsai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
      dsai.descriptorPool = desc_pool_;
      dsai.descriptorSetCount = 1;
      dsai.pSetLayouts = &set_layout_;
      vk::check(vkAllocateDescriptorSets(dev, &dsai, &s.set), "vkAllocateDescriptorSets");
      if (ctx_.timestamp_period_ns() > 0) {
        VkQueryPoolCreateInfo qpci{};
        qpci.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
        qpci.queryType = VK_QUERY_TYPE_TIMESTAMP;
        qpci.queryCount = 2;
        vk::check(vkCreateQueryPool(dev, &qpci, nullptr, &s.queries), "vkCreateQueryPool");
      }
      s.in_stage.host = s.out_stage.host = true;
      s.out_stage.readback = true;
    }
  }

  void add(const TensorView& v) {
    if (!v.present()) fail(v.name.empty() ? "engine" : v.name, "weight tensor missing", "the model file is incomplete");
    vk::DeviceMatrix dm = vk::make_device_matrix(v);
    const VkDeviceSize bytes = std::max<VkDeviceSize>(dm.words.size() * 4, 16);
    if (bytes > ctx_.properties().limits.maxStorageBufferRange)
      fail(v.name, "takes " + std::to_string(bytes) + " bytes on the device, more than its largest storage buffer (" +
                       std::to_string(ctx_.properties().limits.maxStorageBufferRange) + " bytes)",
           "use --engine cpu, or a smaller quantization (q4_0)");
    VulkanResidentMatrix m;
    m.type = dm.type;
    m.rows = dm.rows;
    m.cols = dm.cols;
    m.n_blocks = dm.n_blocks;
    m.buffer = ctx_.make_device_buffer(bytes);
    upload(m.buffer, dm.words.data(), dm.words.size() * 4);
    mats_.push_back(m);
    release_file_pages(v);
  }

  // Copies host bytes into a device buffer through a reused staging buffer, in chunks.
  void upload(const vk::Buffer& dst, const void* src, size_t bytes) {
    if (dst.mapped) {  // unified memory: write it directly
      std::memcpy(dst.mapped, src, bytes);
      return;
    }
    constexpr size_t kChunk = size_t{32} << 20;
    GrowingBuffer& stage = slots_[0].in_stage;
    Slot& s = slots_[0];
    for (size_t off = 0; off < bytes; off += kChunk) {
      const size_t n = std::min(kChunk, bytes - off);
      stage.ensure(ctx_, n);
      std::memcpy(stage.buf.mapped, static_cast<const uint8_t*>(src) + off, n);
      begin(s.cmd);
      VkBufferCopy region{0, off, n};
      vkCmdCopyBuffer(s.cmd, stage.buf.buffer, dst.buffer, 1, &region);
      end_and_run(s);
    }
  }

  // ---- products ----
  const VulkanResidentMatrix& at(WeightHandle h) const {
    if (h < 0 || static_cast<size_t>(h) >= mats_.size()) fail("engine", "invalid weight handle " + std::to_string(h));
    return mats_[static_cast<size_t>(h)];
  }

  static void begin(VkCommandBuffer cmd) {
    VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vk::check(vkBeginCommandBuffer(cmd, &bi), "vkBeginCommandBuffer");
  }

  void submit_cmd(Slot& s) {
    vk::check(vkEndCommandBuffer(s.cmd), "vkEndCommandBuffer");
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &s.cmd;
    vk::check(vkQueueSubmit(ctx_.queue(), 1, &si, s.fence), "vkQueueSubmit");
  }

  void end_and_run(Slot& s) {
    submit_cmd(s);
    vk::check(vkWaitForFences(ctx_.device(), 1, &s.fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    vk::check(vkResetFences(ctx_.device(), 1, &s.fence), "vkResetFences");
  }

  static void barrier(VkCommandBuffer cmd, VkPipelineStageFlags src, VkAccessFlags src_access,
                      VkPipelineStageFlags dst, VkAccessFlags dst_access) {
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = src_access;
    mb.dstAccessMask = dst_access;
    vkCmdPipelineBarrier(cmd, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
  }
  static void compute_to_compute(VkCommandBuffer cmd) {
    barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  }

  void dispatch(VkCommandBuffer cmd, VkPipeline pipeline, const Params& prm, uint32_t gx, uint32_t gy) {
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    vkCmdPushConstants(cmd, pipeline_layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(Params), &prm);
    vkCmdDispatch(cmd, gx, gy, 1);
  }

  void check_dispatch(uint32_t n, int axis) const {
    if (n > ctx_.properties().limits.maxComputeWorkGroupCount[axis])
      fail("engine (vulkan)", "product too large for one dispatch on this device (" + std::to_string(n) +
                                  " workgroups)", "use fewer tokens per batch, or --engine cpu");
  }

  // Grows the slot's buffers to what a product of `tokens` tokens on m needs.
  void ensure_buffers(Slot& s, bool input_grad, const VulkanResidentMatrix& m, uint32_t tokens, Precision prec) {
    const VkDeviceSize in_len = static_cast<VkDeviceSize>(input_grad ? m.rows : m.cols);
    const VkDeviceSize out_len = static_cast<VkDeviceSize>(input_grad ? m.cols : m.rows);
    const VkDeviceSize in_bytes = tokens * in_len * 4, out_bytes = tokens * out_len * 4;
    const VkDeviceSize in_blocks = tokens * ((in_len + 31) / 32);
    s.in_stage.ensure(ctx_, in_bytes);
    s.out_stage.ensure(ctx_, out_bytes);
    s.in_dev.ensure(ctx_, in_bytes);
    s.out_dev.ensure(ctx_, out_bytes);
    // Int8 forward: X is quantized per 32-block by a pass of its own; the input gradient
    // quantizes dY (times the weight scales) inside its shader. F16 (both products): the
    // input becomes packed halves with a scale per row, which the product reads.
    const bool quantize_input = prec == Precision::Int8 && !input_grad;
    const bool half_input = prec == Precision::F16;
    const VkDeviceSize half_bytes = tokens * ((in_len + 1) / 2) * 4;
    s.quant_dev.ensure(ctx_, quantize_input ? in_blocks * 32 : half_input ? half_bytes : 16);
    s.scale_dev.ensure(ctx_, quantize_input ? in_blocks * 4 : half_input ? VkDeviceSize{tokens} * 4 : 16);
  }

  // Grows every slot's buffers now (after the products in flight, which use them), so that
  // products up to max_tokens make no buffers while a step runs.
  void reserve(bool input_grad, const VulkanResidentMatrix& m, int64_t max_tokens, Precision prec) {
    if (max_tokens <= 0) return;
    if (max_tokens * std::max(m.rows, m.cols) >= (int64_t{1} << 32)) return;  // submit refuses it
    std::lock_guard<std::mutex> lk(mu_);
    while (!pending_.empty()) complete_oldest();
    for (Slot& s : slots_) ensure_buffers(s, input_grad, m, static_cast<uint32_t>(max_tokens), prec);
  }

  EngineTicket submit(bool input_grad, const VulkanResidentMatrix& m, const float* in, int64_t T, float* out, Precision prec) {
    if (T < 0) fail("engine", "negative token count");
    std::lock_guard<std::mutex> lk(mu_);
    const EngineTicket ticket = ++issued_;
    if (T == 0) return ticket;  // nothing to compute; earlier products still complete in wait()
    if (T * std::max(m.rows, m.cols) >= (int64_t{1} << 32))
      fail("engine (vulkan)", "product too large (2^32 activation elements or more)", "use fewer tokens per batch");

    const int slot_index = next_slot_;
    next_slot_ = (next_slot_ + 1) % kSlots;
    Slot& s = slots_[static_cast<size_t>(slot_index)];
    // The ring reuses the oldest slot: complete everything up to it first.
    while (s.busy) complete_oldest();

    const uint32_t in_len = static_cast<uint32_t>(input_grad ? m.rows : m.cols);
    const uint32_t out_len = static_cast<uint32_t>(input_grad ? m.cols : m.rows);
    const uint32_t tokens = static_cast<uint32_t>(T);
    const VkDeviceSize in_bytes = VkDeviceSize{tokens} * in_len * 4, out_bytes = VkDeviceSize{tokens} * out_len * 4;
    const VkDeviceSize in_blocks = VkDeviceSize{tokens} * ((in_len + 31) / 32);
    const bool quantize_input = prec == Precision::Int8 && !input_grad;
    ensure_buffers(s, input_grad, m, tokens, prec);
    std::memcpy(s.in_stage.buf.mapped, in, in_bytes);

    VkDescriptorBufferInfo infos[kBindings] = {
        {m.buffer.buffer, 0, VK_WHOLE_SIZE},       {s.in_dev.buf.buffer, 0, VK_WHOLE_SIZE},
        {s.out_dev.buf.buffer, 0, VK_WHOLE_SIZE},  {s.quant_dev.buf.buffer, 0, VK_WHOLE_SIZE},
        {s.scale_dev.buf.buffer, 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet writes[kBindings]{};
    for (uint32_t i = 0; i < kBindings; ++i) {
      writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[i].dstSet = s.set;
      writes[i].dstBinding = i;
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    vkUpdateDescriptorSets(ctx_.device(), kBindings, writes, 0, nullptr);

    Params prm{static_cast<uint32_t>(m.type), static_cast<uint32_t>(m.rows), static_cast<uint32_t>(m.cols),
               static_cast<uint32_t>(m.n_blocks), tokens, static_cast<uint32_t>(prec), in_len, 0};
    const uint32_t token_tiles = (tokens + kTileTokens - 1) / kTileTokens;
    const uint32_t gx = input_grad ? static_cast<uint32_t>((m.cols + kTileCols - 1) / kTileCols)
                                   : static_cast<uint32_t>((m.rows + kForwardTileRows - 1) / kForwardTileRows);
    check_dispatch(gx, 0);
    check_dispatch(token_tiles, 1);
    if (prec == Precision::F16) check_dispatch(tokens, 0);
    const uint32_t quant_groups = static_cast<uint32_t>((in_blocks + kRowPassGroup - 1) / kRowPassGroup);
    if (quantize_input) check_dispatch(quant_groups, 0);

    VkCommandBuffer cmd = s.cmd;
    begin(cmd);
    if (s.queries) {
      vkCmdResetQueryPool(cmd, s.queries, 0, 2);
      vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, s.queries, 0);
    }
    VkBufferCopy in_region{0, 0, in_bytes};
    vkCmdCopyBuffer(cmd, s.in_stage.buf.buffer, s.in_dev.buf.buffer, 1, &in_region);
    barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout_, 0, 1, &s.set, 0, nullptr);
    if (prec == Precision::F16) {
      dispatch(cmd, guard_f16_, prm, tokens, 1);
      compute_to_compute(cmd);
    } else if (quantize_input) {
      dispatch(cmd, quantize_q8_, prm, quant_groups, 1);
      compute_to_compute(cmd);
    }
    dispatch(cmd, input_grad ? input_grad_ : forward_, prm, gx, token_tiles);
    if (prec == Precision::F16) {
      compute_to_compute(cmd);
      Params out_prm = prm;
      out_prm.len = out_len;
      out_prm.target = 1;
      dispatch(cmd, guard_f16_, out_prm, tokens, 1);
    }
    barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_TRANSFER_READ_BIT);
    VkBufferCopy out_region{0, 0, out_bytes};
    vkCmdCopyBuffer(cmd, s.out_dev.buf.buffer, s.out_stage.buf.buffer, 1, &out_region);
    barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
            VK_ACCESS_HOST_READ_BIT);
    if (s.queries) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, s.queries, 1);
    submit_cmd(s);

    s.busy = true;
    s.input_grad = input_grad;
    s.out = out;
    s.out_bytes = static_cast<size_t>(out_bytes);
    pending_.push_back(Pending{ticket, slot_index});
    return ticket;
  }

  // Waits for the oldest product in flight and hands its result to the caller. mu_ held.
  void complete_oldest() {
    const Pending p = pending_.front();
    Slot& s = slots_[static_cast<size_t>(p.slot)];
    vk::check(vkWaitForFences(ctx_.device(), 1, &s.fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    vk::check(vkResetFences(ctx_.device(), 1, &s.fence), "vkResetFences");
    std::memcpy(s.out, s.out_stage.buf.mapped, s.out_bytes);
    if (s.queries) {
      uint64_t stamps[2] = {0, 0};
      if (vkGetQueryPoolResults(ctx_.device(), s.queries, 0, 2, sizeof(stamps), stamps, sizeof(uint64_t),
                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) == VK_SUCCESS) {
        const uint64_t ticks = (stamps[1] - stamps[0]) & ctx_.timestamp_mask();
        const double seconds = static_cast<double>(ticks) * ctx_.timestamp_period_ns() * 1e-9;
        (s.input_grad ? device_time_.input_grad_s : device_time_.forward_s) += seconds;
        device_time_.measured = true;
      }
    }
    ++device_time_.products;
    s.busy = false;
    s.out = nullptr;
    pending_.pop_front();
  }

  vk::Context ctx_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;
  VkPipeline forward_ = VK_NULL_HANDLE, input_grad_ = VK_NULL_HANDLE, guard_f16_ = VK_NULL_HANDLE,
             quantize_q8_ = VK_NULL_HANDLE;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkDescriptorPool desc_pool_ = VK_NULL_HANDLE;
  std::vector<Slot> slots_;
  int64_t n_layer_ = 0;
  std::vector<VulkanResidentMatrix> mats_;

  mutable std::mutex mu_;
  std::deque<Pending> pending_;
  int next_slot_ = 0;
  EngineTicket issued_ = 0;
  EngineDeviceTime device_time_;
};

}  // namespace

std::unique_ptr<FrozenEngine> make_vulkan_engine(const Model& model, const EngineOptions& opt) {
  return std::make_unique<VulkanEngine>(model, opt);
}

bool vulkan_gpu_present() {
  for (const vk::DeviceInfo& d : vk::Context::list_devices())
    if (d.has_compute_queue && d.type != VK_PHYSICAL_DEVICE_TYPE_CPU && d.type != VK_PHYSICAL_DEVICE_TYPE_OTHER)
      return true;
  return false;
}

}  // namespace nl
