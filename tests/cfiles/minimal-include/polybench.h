/* A minimal stand-in, written for polymap's tests, for the few macros of
 * PolyBench's utilities/polybench.h that the test kernels use. The tests
 * use PolyBench's own header when /work/shared/polybench is on the machine
 * and this one elsewhere (CI). Arrays have their constant extents and the
 * loops run to the size arguments, as PolyBench's defaults do. */
#ifndef POLYMAP_TEST_POLYBENCH_H
#define POLYMAP_TEST_POLYBENCH_H
#define POLYBENCH_PADDING_FACTOR 0
#define POLYBENCH_LOOP_BOUND(x, y) y
#define POLYBENCH_1D(var, dim1, ddim1) var[dim1 + POLYBENCH_PADDING_FACTOR]
#define POLYBENCH_2D(var, dim1, dim2, ddim1, ddim2) var[dim1 + POLYBENCH_PADDING_FACTOR][dim2 + POLYBENCH_PADDING_FACTOR]
#endif
