#!/bin/sh
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/prolog.d/*, run as root by slurmd on each node of
# the job): records the job on each GPU it was given, in dcgm-exporter's job-mapping layout that
# `ridgeline serve --hpc-job-mapping-dir` reads — one file per GPU index (`0`) or MIG instance
# (`<gpu>.<instance>`, e.g. `3.1`), one job id per line. Several jobs on one GPU (shard GRES, MPS)
# each add their line. See docs/deployment.md (Slurm).
#
# A failing prolog drains the node and requeues the job, so this script never fails: a problem
# is a line on stderr (slurmd's log) and the job runs unlabelled.
dir="${RIDGELINE_HPC_JOB_MAPPING_DIR:-${DCGM_HPC_JOB_MAPPING_DIR:-/run/ridgeline/hpc-jobs}}"
job="${SLURM_JOB_ID:-}"
# SLURM_JOB_GPUS: the GPU indexes allocated to the job on this node (Prolog/Epilog environment);
# with gres.conf AutoDetect=nvml they are the NVML indexes Ridgeline's gpu label shows. A site
# whose jobs get MIG instances sets RIDGELINE_HPC_JOB_GPUS to their <gpu>.<instance> list instead.
gpus="${RIDGELINE_HPC_JOB_GPUS:-${SLURM_JOB_GPUS:-}}"
[ -n "$job" ] && [ -n "$gpus" ] || exit 0
umask 022
mkdir -p "$dir" || { echo "ridgeline prolog: cannot create $dir" >&2; exit 0; }
for gpu in $(echo "$gpus" | tr ',' ' '); do
  case "$gpu" in
    '' | *[!0-9.]* | .* | *. | *.*.*) echo "ridgeline prolog: skipping GPU '$gpu'" >&2; continue ;;
  esac
  # Under a lock: two jobs sharing a GPU may start at the same moment.
  (
    flock 9 || exit 0
    grep -qx -- "$job" "$dir/$gpu" 2>/dev/null || printf '%s\n' "$job" >>"$dir/$gpu"
  ) 9>"$dir/.lock" || echo "ridgeline prolog: cannot record job $job on GPU $gpu in $dir" >&2
done
exit 0
