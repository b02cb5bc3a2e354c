/* cuda_user_lib.c: a CUDA runtime's first use of the driver, for cuda_user.c. */
#pragma once

/* dlopen("libcuda.so.1"), cuInit, every device's primary context retained
   (own_flags, when not 0, set on each device first). Once per process: the
   devices retained, -1 without a driver. */
int cuda_user_first_use(unsigned own_flags);
/* Every retained primary context released (a runtime's teardown at exit). */
void cuda_user_release_all(void);
