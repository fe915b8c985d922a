# Sidekiq 6.4 (Debian's ruby-sidekiq) against the server at ARGV[0]: a
# `sidekiq` worker process runs a job enqueued now and two scheduled ones
# (perform_in, perform_at), which the scheduler moves with its Lua script.
# Exits non-zero on any failure.
url = ARGV.fetch(0)
ENV["CAIRN_CLIENTS_URL"] = url
require_relative "sidekiq_jobs"
require "sidekiq/api"
require "tempfile"

def check(cond, what)
  raise "FAILED: #{what}" unless cond
  puts "ok: #{what}"
end

def done
  Sidekiq.redis { |r| r.lrange("cairn:sidekiq:done", 0, -1) }.sort
end

CairnJob.perform_async("now", 21)
CairnJob.perform_in(1, "in", 2)
CairnJob.perform_at(Time.now + 2, "at", 3)
check(Sidekiq::ScheduledSet.new.size == 2, "two jobs wait in the schedule")

log = Tempfile.new(["cairn-sidekiq-", ".log"])
pid = Process.spawn("sidekiq", "-r", File.expand_path("sidekiq_jobs.rb", __dir__),
                    "-c", "2", "-t", "2", in: File::NULL, out: log.path, err: [:child, :out])
ok = false
begin
  deadline = Time.now + 30
  want = ["at:6", "in:4", "now:42"]
  until done == want || Time.now > deadline
    # No result can come from a worker that has exited: fail now.
    raise "FAILED: sidekiq exited (#{$?})" if Process.wait(pid, Process::WNOHANG)
    sleep 0.1
  end
  check(done == want, "the job and both scheduled jobs ran (#{done.inspect})")
  check(Sidekiq::ScheduledSet.new.size.zero?, "the schedule is empty")
  check(Sidekiq::Queue.new("default").size.zero?, "the queue is empty")
  ok = true
ensure
  begin
    Process.kill("TERM", pid)
    Process.wait(pid) # -t 2: it stops within about 2 s
  rescue Errno::ESRCH, Errno::ECHILD
  end
  unless ok
    lines = File.readlines(log.path)
    puts "--- sidekiq output, last #{[lines.size, 60].min} of #{lines.size} lines:"
    puts lines.last(60).join, "--- end"
  end
  log.close!
end
puts "sidekiq_check: all checks passed"
