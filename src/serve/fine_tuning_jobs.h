// Fine-tuning jobs (POST /v1/fine_tuning/jobs and friends): each job is the same training job
// as `nightlora train` (run_training_job) on the server's resident model, run one at a time
// by a background thread. Every use of the engine by the job holds a training turn, so the
// requests being served go first (between its steps). A job's folder DATA/jobs/<id>/ holds
// job.json (the job and its events, written atomically) and run/ (the training run's folder:
// checkpoints, log, the adapter). After a kill -9 and a restart, queued and running jobs are
// queued again and a running one continues from its newest checkpoint (the training job's
// resume), so its adapter is the same bytes as an uninterrupted run's; succeeded jobs'
// adapters are served again under their fine_tuned_model names.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "nightlora/train/training_job.h"

namespace nl {
class ResidentModel;
}

namespace nl::serve {

class AdapterRegistry;
class FileStore;

class FineTuningJobs {
 public:
  FineTuningJobs(ResidentModel& resident, AdapterRegistry& registry, const FileStore& files, const std::string& dir,
                 int max_queued, std::function<void(const std::string&)> log);
  ~FineTuningJobs();  // shutdown()

  // Starts the worker (after the server can answer requests).
  void start();
  // The running job stops at its next step boundary with a checkpoint (it stays "running"
  // in its record and continues when a server starts on the folder again); waits for it.
  void shutdown();

  nlohmann::json create(const nlohmann::json& body);  // 400 / 429 as ApiError
  nlohmann::json get(const std::string& id) const;     // 404 as ApiError
  nlohmann::json list(const std::string& after, int64_t limit) const;
  nlohmann::json events(const std::string& id, const std::string& after, int64_t limit) const;
  nlohmann::json cancel(const std::string& id);

 private:
  struct Job;
  class Output;
  void worker();
  void run_one(const std::shared_ptr<Job>& job);
  void persist(const Job& job) const;  // under mu_
  void add_event(Job& job, const std::string& message, const std::string& level = "info");  // under mu_
  TrainingJobOptions options_of(const Job& job) const;
  std::shared_ptr<Job> find(const std::string& id) const;  // under mu_; 404 when unknown

  ResidentModel& resident_;
  AdapterRegistry& registry_;
  const FileStore& files_;
  std::string dir_;
  int max_queued_;
  std::function<void(const std::string&)> log_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;
  std::deque<std::string> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace nl::serve
