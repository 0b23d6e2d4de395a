/* SPDX-License-Identifier: BSD-3-Clause */
#include "vdev_test_util.h"

#include <unistd.h>

namespace vdev_test {

std::string
sim_name(const std::string &tag)
{
	return "simvdev" + std::to_string(getpid()) + tag;
}

bool
shm_exists(const std::string &name)
{
	return access(("/dev/shm/" + name).c_str(), F_OK) == 0;
}

} /* namespace vdev_test */
