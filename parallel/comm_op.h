// parallel/comm_op.h: the reduction operations of the host (parallel/comm.h)
// and device (parallel/comm_nccl.h) collectives. Defines CommOp. Its own
// header so that the device side compiles without MPI's headers.
#ifndef FIMI_PARALLEL_COMM_OP_H
#define FIMI_PARALLEL_COMM_OP_H

typedef enum { COMM_SUM = 0, COMM_MEAN = 1, COMM_MAX = 2 } CommOp;

#endif
