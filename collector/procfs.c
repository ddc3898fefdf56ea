// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zlib.h>

#include "procfs.h"

static int read_comm(const char *path, char *buf, size_t len)
{
	char tmp[64];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, tmp, sizeof(tmp) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENODATA;
	tmp[n] = '\0';
	tmp[strcspn(tmp, "\n")] = '\0';
	snprintf(buf, len, "%s", tmp);
	return 0;
}

int proc_comm(int pid, char *buf, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	return read_comm(path, buf, len);
}

int proc_thread_comm(int pid, int tid, char *buf, size_t len)
{
	char path[96];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	return read_comm(path, buf, len);
}

char *proc_cmdline(int pid, size_t *len)
{
	char path[64];
	size_t cap = 4096, used = 0;
	char *buf = malloc(cap);
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (!buf || fd < 0) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while ((n = read(fd, buf + used, cap - used)) > 0) {
		used += n;
		if (used == cap) {
			char *grown = realloc(buf, cap * 2);

			if (!grown)
				break;
			buf = grown;
			cap *= 2;
		}
	}
	close(fd);
	*len = used;
	return buf;
}

int proc_for_each_thread(int pid, void (*fn)(int tid, void *arg), void *arg)
{
	char path[64];
	struct dirent *e;
	int count = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while ((e = readdir(dir))) {
		int tid = atoi(e->d_name);

		if (tid > 0) {
			fn(tid, arg);
			count++;
		}
	}
	closedir(dir);
	return count;
}

int kernel_config_enabled(const char *option)
{
	char path[128], line[256], want[128];
	struct utsname u;
	gzFile f = gzopen("/proc/config.gz", "r"); /* zlib also reads the plain /boot file */
	int found = 0;

	if (!f && uname(&u) == 0) {
		snprintf(path, sizeof(path), "/boot/config-%s", u.release);
		f = gzopen(path, "r");
	}
	if (!f)
		return -1;
	snprintf(want, sizeof(want), "%s=y\n", option);
	while (!found && gzgets(f, line, sizeof(line)))
		found = strcmp(line, want) == 0;
	gzclose(f);
	return found;
}
