/* SPDX-License-Identifier: Apache-2.0 */
/*
 * serve.h - the page-fault daemon behind `faultline serve`.
 */
#ifndef FAULTLINE_SERVE_H
#define FAULTLINE_SERVE_H

#include "daemon/config.h"

/* Run until SIGTERM (and drained) or, with once, the first session's end. */
int serve_run(const struct serve_config *cfg);

#endif
