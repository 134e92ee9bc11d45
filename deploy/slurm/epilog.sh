#!/bin/sh
# Slurm Epilog (slurm.conf: Epilog=/etc/slurm/epilog.d/*): removes the job from each GPU's (or MIG
# instance's) file that prolog.sh wrote, and the file with its last job, so `hpc_job` disappears
# with the job. Never fails (a failing epilog drains the node); problems are a line on stderr.
dir="${RIDGELINE_HPC_JOB_MAPPING_DIR:-${DCGM_HPC_JOB_MAPPING_DIR:-/run/ridgeline/hpc-jobs}}"
job="${SLURM_JOB_ID:-}"
gpus="${RIDGELINE_HPC_JOB_GPUS:-${SLURM_JOB_GPUS:-}}"
[ -n "$job" ] && [ -n "$gpus" ] && [ -d "$dir" ] || exit 0
umask 022
for gpu in $(echo "$gpus" | tr ',' ' '); do
  case "$gpu" in '' | *[!0-9.]* | .* | *. | *.*.*) continue ;; esac
  (
    flock 9 || exit 0
    file="$dir/$gpu"
    [ -f "$file" ] || exit 0
    # The rest of the jobs go to a hidden name the reader skips, then replace the file whole.
    grep -vx -- "$job" "$file" >"$dir/.$gpu.next" || true
    if [ -s "$dir/.$gpu.next" ]; then mv -f "$dir/.$gpu.next" "$file"; else rm -f "$file" "$dir/.$gpu.next"; fi
  ) 9>"$dir/.lock" || echo "ridgeline epilog: cannot remove job $job from GPU $gpu in $dir" >&2
done
exit 0
