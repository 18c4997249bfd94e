# launch/cluster-env.sh: the environment fimi's cluster launchers export to
# every rank (sourced by launch/mpirun-5node.sh and launch/slurm/common.sh).
# Each variable is set only when the caller has not set it, so a site
# overrides any of them in its environment. Reference node: 8 x H200 joined by
# NVLink/NVSwitch, one 400 Gb/s InfiniBand (NDR) HCA per GPU, Open MPI with
# UCX. What the launchers forward is FIMI_EXPORTED_VARS.
#
# Written for that node and not yet run on one: the first run on a new
# cluster should set NCCL_DEBUG=INFO and check the lines named below.

# ---- NCCL (device-buffer collectives: the ZeRO-3 gathers and reduce-scatters)
# WARN prints only problems; INFO prints the topology NCCL found. On the
# first run look for "NET/IB : Using [0]mlx5_0:1/IB ..." (the IB HCAs, not
# "NET/Socket", which would mean TCP) and "GPU Direct RDMA Enabled" (the NIC
# reads GPU memory directly; it needs the nvidia-peermem module or DMA-BUF).
: "${NCCL_DEBUG:=WARN}"
: "${NCCL_DEBUG_SUBSYS:=INIT,NET}"
# GPU numbers as nvidia-smi and the topology (`nvidia-smi topo -m`) print
# them, so "GPU i" in launch/layout.sh is the GPU next to NIC i and core block i.
: "${CUDA_DEVICE_ORDER:=PCI_BUS_ID}"
# Site-specific, left to NCCL's detection unless set:
#   NCCL_IB_HCA         the compute-fabric HCAs when a node also has storage or
#                       Ethernet mlx5 ports (e.g. "=mlx5_0,mlx5_1,..."; "=" is
#                       an exact match). NCCL otherwise uses every active IB port.
#   NCCL_SOCKET_IFNAME  the interface of NCCL's TCP bootstrap when nodes have
#                       several (NCCL already skips lo and docker*).
#   NCCL_IB_GID_INDEX   only on RoCE (Ethernet) fabrics, not on InfiniBand.

# ---- Open MPI and UCX (host-buffer messages: fimi's CPU collectives, the
# train <-> env rank episodes, the broadcast of NCCL's unique id)
# UCX is Open MPI's InfiniBand path (the openib BTL is deprecated in 4.x and
# gone in 5.x); excluding openib silences its start-up warning on IB nodes.
# Only where this node has InfiniBand devices: elsewhere (a laptop, CI)
# Open MPI's own choice (shared memory, TCP) stays, since a forced ucx PML
# without IB can refuse to start.
if compgen -G "/sys/class/infiniband/*" >/dev/null; then
  : "${OMPI_MCA_pml:=ucx}"
  : "${OMPI_MCA_btl:=^openib}"
fi
# Site-specific: UCX_NET_DEVICES (e.g. mlx5_0:1) pins the host messages to
# one HCA; UCX otherwise picks among all of them.

# ---- MLflow (docs/tracking.md, "MLflow"): the tracking server, experiment
# and token of the run, when the caller set them. Only rank 0 talks to the
# server, but mpirun forwards named variables only, and rank 0 may be on
# another node than mpirun. -x VAR names the variable: the token's value
# never appears on the printed command line.
FIMI_EXPORTED_VARS=(NCCL_DEBUG NCCL_DEBUG_SUBSYS CUDA_DEVICE_ORDER)
for var in OMPI_MCA_pml OMPI_MCA_btl NCCL_IB_HCA NCCL_SOCKET_IFNAME NCCL_IB_GID_INDEX UCX_NET_DEVICES UCX_TLS OMP_NUM_THREADS \
           MLFLOW_TRACKING_URI MLFLOW_EXPERIMENT_NAME MLFLOW_TRACKING_TOKEN; do
  [ -n "${!var:-}" ] && FIMI_EXPORTED_VARS+=("$var")
done
export "${FIMI_EXPORTED_VARS[@]}"
