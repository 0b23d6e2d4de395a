/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Precompiled header of the GoogleTest executable (tests/meson.build, -Dtests_pch=true): the
 * headers nearly every test file includes, GoogleTest's above all, parsed once per build tree
 * instead of once per source. It only saves compile time: every source still includes what it
 * uses, and a build without it (-Dtests_pch=false, or b_pch=false) compiles the same code.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>
