# Sidekiq 6.4 jobs for sidekiq_check.rb. Scheduled jobs reach their queue
# through the poller's ZPOPBYSCORE Lua script (EVALSHA, reloaded on NOSCRIPT).
require "sidekiq"

url = ENV.fetch("CAIRN_CLIENTS_URL")
Sidekiq.configure_server { |config| config.redis = { url: url } }
Sidekiq.configure_client { |config| config.redis = { url: url } }
# Poll the schedule about every second and skip the 10 s start-up wait that
# is there only to count the processes of a large deployment.
Sidekiq.options[:poll_interval_average] = 1

class CairnJob
  include Sidekiq::Worker
  sidekiq_options retry: false

  def perform(tag, n)
    Sidekiq.redis { |r| r.rpush("cairn:sidekiq:done", "#{tag}:#{n * 2}") }
  end
end
