/*
 * rlperf_fionames.c - the names of every option fio 3.33 knows: its job
 * options and their aliases (options.c and each engine's options), and its
 * command-line options (init.c). rlperf refuses an option of this list that
 * it does not have as "not supported by rlperf", and anything else as
 * unrecognized, as fio does. Taken from fio's source at tag fio-3.33.
 */
#include <stdlib.h>
#include <string.h>

#include "rlperf.h"

static const char *const fio_names[] = {
	"alloc-size", "allow_file_create", "allow_mounted_write", "allrandrepeat",
	"append-terse", "arguments", "atomic", "aux-path", "ba", "bandwidth-log",
	"bindname", "block_error_percentiles", "blockalign", "blocksize",
	"blocksize_range", "blocksize_unaligned", "brick", "bs", "bs_is_seq_rand",
	"bs_unaligned", "bsrange", "bssplit", "buffer_compress_chunk",
	"buffer_compress_percentage", "buffer_pattern", "buffered", "busy_poll",
	"busy_wait_polling", "bwavgtime", "cgroup", "cgroup_nodelete", "cgroup_weight",
	"chunck_size", "chunk_size", "clat_percentiles", "client", "clientname",
	"clocksource", "clustername", "cmd_type", "cmdhelp", "cmdprio",
	"cmdprio_bssplit", "cmdprio_class", "cmdprio_percentage", "conf", "cont",
	"continue_on_error", "cpuchunks", "cpuclock-test", "cpuload", "cpumask",
	"cpumode", "cpus_allowed", "cpus_allowed_policy", "crctest", "create_fsync",
	"create_on_open", "create_only", "create_serialize", "cuda_io", "daemonize",
	"debug", "dedupe_global", "dedupe_mode", "dedupe_percentage",
	"dedupe_working_set_percentage", "description", "direct",
	"direct_write_to_pmem", "directory", "disable_bw", "disable_bw_measurement",
	"disable_clat", "disable_lat", "disable_slat", "disk_util", "do_verify",
	"donorname", "dummy", "end_fsync", "enghelp", "error_dump", "eta",
	"eta-interval", "eta-newline", "exec_postrun", "exec_prerun",
	"exit_on_io_done", "exit_what", "exitall", "exitall_on_error",
	"experimental_verify", "fadvise_hint", "fallocate", "fdatasync", "file_append",
	"file_service_type", "filename", "filename_format", "fileoffset", "filesize",
	"fill_device", "fill_fs", "fixedbufs", "flow", "flow_id", "flow_sleep",
	"flow_watermark", "force_async", "fsync", "fsync_on_close", "gid",
	"gpu_dev_id", "gpu_dev_ids", "grace_time", "group_reporting", "gtod_cpu",
	"gtod_reduce", "hdfs_use_direct", "hdfsdirectory", "help", "hipri",
	"hipri_percentage", "hostname", "http_host", "http_mode", "http_pass",
	"http_s3_key", "http_s3_keyid", "http_s3_region",
	"http_s3_sse_customer_algorithm", "http_s3_sse_customer_key",
	"http_s3_storage_class", "http_swift_auth_token", "http_user", "http_verbose",
	"https", "hugepage-size", "idle-prof", "ignore_error", "ignore_zone_limits",
	"inflate-log", "initiator", "inplace", "interface", "invalidate", "io_limit",
	"io_size", "io_submit_mode", "iodepth", "iodepth_batch",
	"iodepth_batch_complete", "iodepth_batch_complete_max",
	"iodepth_batch_complete_min", "iodepth_batch_submit", "iodepth_low",
	"ioengine", "iomem", "iomem_align", "iopsavgtime", "ioscheduler",
	"job_max_open_zones", "kb_base", "lat_percentiles", "latency-log",
	"latency_percentile", "latency_run", "latency_target", "latency_window",
	"listen", "lockfile", "lockmem", "log_alternate_epoch",
	"log_alternate_epoch_clock_id", "log_avg_msec", "log_compression",
	"log_compression_cpus", "log_entries", "log_hist_coarseness", "log_hist_msec",
	"log_max_value", "log_offset", "log_prio", "log_store_compressed",
	"log_unix_epoch", "loops", "max-jobs", "max_latency", "max_open_zones", "mem",
	"mem_align", "memcpytest", "merge-blktrace-only", "merge_blktrace_file",
	"merge_blktrace_iters", "merge_blktrace_scalars", "minimal", "mss", "name",
	"namenode", "new_group", "nfs_url", "nice", "no_completion_thread", "nodelay",
	"nonvectored", "norandommap", "nowait", "nr_files", "nrfiles",
	"numa_cpu_nodes", "numa_mem_policy", "number_ios", "numjobs", "object_class",
	"offset", "offset_align", "offset_increment", "opendir", "openfiles", "output",
	"output-format", "overwrite", "parse-only", "per_job_logs",
	"percentage_random", "percentage_sequential", "percentile_list", "pingpong",
	"pool", "port", "pre_read", "prio", "prioclass", "profile", "program", "proto",
	"protocol", "ramp_time", "random_distribution", "random_generator",
	"randrepeat", "randseed", "rate", "rate_cycle", "rate_ignore_thinktime",
	"rate_iops", "rate_iops_min", "rate_min", "rate_process", "ratecycle",
	"ratemin", "rbdname", "read_beyond_wp", "read_iolog", "read_iolog_chunked",
	"readfua", "readonly", "readwrite", "refill_buffers", "registerfiles",
	"remote-config", "replay_align", "replay_no_stall", "replay_redirect",
	"replay_scale", "replay_skip", "replay_time_scale", "runtime", "rw",
	"rw_sequencer", "rwmixcycle", "rwmixread", "rwmixwrite", "scramble_buffers",
	"section", "serialize_overlap", "server", "server-internal", "serverip",
	"sg_write_mode", "showcmd", "significant_figures", "single-instance",
	"single_instance", "size", "skip_bad", "slat_percentiles", "softrandommap",
	"sqthread_poll", "sqthread_poll_cpu", "ss", "ss_dur", "ss_ramp", "startdelay",
	"stat_type", "stats", "status-interval", "std_redirect", "steadystate",
	"steadystate_duration", "steadystate_ramp_time", "stonewall", "stream_id",
	"svcl", "sync", "sync_file_range", "terse-version", "thinktime",
	"thinktime_blocks", "thinktime_blocks_type", "thinktime_iotime",
	"thinktime_spin", "thp", "thread", "time_based", "timeout", "touch_objects",
	"trigger", "trigger-file", "trigger-remote", "trigger-timeout", "trim_backlog",
	"trim_backlog_batch", "trim_percentage", "trim_verify_zero", "ttl", "uid",
	"uncached", "unified_rw_reporting", "unique_filename", "unit_base", "unlink",
	"unlink_each_loop", "uri", "userspace_reap", "verb", "verify", "verify_async",
	"verify_async_cpus", "verify_backlog", "verify_backlog_batch", "verify_dump",
	"verify_fatal", "verify_interval", "verify_offset", "verify_only",
	"verify_pattern", "verify_state_load", "verify_state_save", "verifysort",
	"verifysort_nr", "version", "volume", "wait_for", "wait_for_previous",
	"warnings-fatal", "window_size", "write_barrier", "write_bw_log", "write_hint",
	"write_hist_log", "write_iolog", "write_iops_log", "write_lat_log", "writefua",
	"xnvme_admin", "xnvme_async", "xnvme_be", "xnvme_dev_nsid", "xnvme_iovec",
	"xnvme_sync", "zero_buffers", "zone_reset_frequency", "zone_reset_threshold",
	"zonecapacity", "zonemode", "zonerange", "zonesize", "zoneskip",
};

static int cmp_name(const void *key, const void *elem)
{
	return strcmp(key, *(const char *const *)elem);
}

int rp_is_fio_option(const char *name)
{
	return bsearch(name, fio_names, RP_ARRAY_SIZE(fio_names), sizeof(fio_names[0]),
		       cmp_name) != NULL;
}
