/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A string the target chose (a thread name, an argument, a path, a symbol) as JSON text: the capture
 * (capture.c) and its stacks block (stacks.c) write them through here, so both stay valid UTF-8 whatever
 * the bytes (docs/capture-format.md).
 */
#ifndef SPINSCOPE_TEXT_H
#define SPINSCOPE_TEXT_H

#include <json-c/json.h>

/* s as a JSON string, each byte that does not start a well-formed UTF-8 sequence replaced by U+FFFD. */
json_object *text_json(const char *s);

#endif
