/* cuda_user_transparency.c: pthread_create, pthread_setname_np and prctl as
   the process binds them (under the probe: its interposers) against glibc's
   own definitions, for cuda_user.c's --transparency. */
#pragma once

#include <pthread.h>

typedef int (*create_fn)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

/* The program's own pthread_create, pthread_setname_np and prctl, and
   driver_create (when not NULL: the stand-in driver's fake_cuda_create_thread,
   a pthread_create called from the driver's code) against glibc's; prints
   "transparency: ok" or the first difference. 0 when they all agree. */
int cuda_user_transparency(create_fn driver_create);
