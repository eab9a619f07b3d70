#!/usr/bin/env python3
"""The CUDA emulator's source step (tests/cuda_emu/README.md): a .cu file as C++ a host compiler
takes, its lines kept where they were (a #line names the .cu file, so messages point at it).

  kernel<<<grid, block, shared, stream>>>(args);
    -> ::cuda_emu::launch(::cuda_emu::Launch(grid, block, shared, stream), "kernel",
                          ADDRESS, [=](auto&... a) { kernel(a...); }, args);
    where ADDRESS is the kernel's address, or nullptr where the launch deduces its template arguments:
      ::cuda_emu::kernel_address([&](auto z) -> decltype(::cuda_emu::address_of(kernel, z)) {
          return ::cuda_emu::address_of(kernel, z); }, 0)
  extern __shared__ [__align__(N)] T name[];
    -> T* const name = ::cuda_emu::dynamic_shared<T>();
  __shared__ [__align__(N)] T name[N]...;   (or a scalar)
    -> T (&name)[N]... = ::cuda_emu::block_shared<T[N]...>(a static of the declaration's own);

Everything else is left to the emulator's headers (tests/cuda_emu/include).

Usage: translate.py IN.cu OUT.cpp
"""
import re
import sys

IDENT = re.compile(r"[A-Za-z0-9_:]")


def callee_start(text, end):
    """The start of the callee expression that ends at `end` (exclusive): a name, qualified,
    with template arguments in balanced angle brackets."""
    i = end
    while i > 0:
        c = text[i - 1]
        if c == ">":
            depth, j = 0, i - 1
            while j >= 0:
                if text[j] == ">":
                    depth += 1
                elif text[j] == "<":
                    depth -= 1
                    if depth == 0:
                        break
                j -= 1
            i = j
        elif IDENT.match(c):
            i -= 1
        else:
            break
    return i


def balanced_end(text, start):
    """The index just after the parenthesis that closes the one at `start`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    raise SystemExit("translate.py: unbalanced parentheses after a launch")


def rewrite_launches(text):
    out, pos = [], 0
    while True:
        open_at = text.find("<<<", pos)
        if open_at < 0:
            out.append(text[pos:])
            return "".join(out)
        close_at = text.index(">>>", open_at)
        start = callee_start(text, open_at)
        callee = text[start:open_at]
        if not callee.strip():
            raise SystemExit("translate.py: a launch without a kernel name at offset %d" % open_at)
        config = text[open_at + 3 : close_at]
        paren = close_at + 3
        while text[paren].isspace():
            paren += 1
        if text[paren] != "(":
            raise SystemExit("translate.py: a launch of %s without arguments" % callee)
        args_end = balanced_end(text, paren)
        args = text[paren + 1 : args_end - 1]
        name = re.sub(r"\s+", " ", callee).replace('"', "'")
        out.append(text[pos:start])
        out.append(
            '::cuda_emu::launch(::cuda_emu::Launch(%s), "%s", %s, [=](auto&... a) { %s(a...); }%s%s)'
            % (config, name, ADDRESS % (callee, callee), callee, ", " if args.strip() else "", args)
        )
        pos = args_end


EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?([A-Za-z_][\w\s:<>]*?)\s+(\w+)\s*\[\s*\]\s*;")
STATIC_SHARED = re.compile(r"__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?([A-Za-z_][\w\s:<>]*?)\s+(\w+)\s*((?:\[[^\];]*\])*)\s*;")
SITE = "[] { static const char site = 0; return &site; }()"
ADDRESS = ("::cuda_emu::kernel_address([&](auto z) -> decltype(::cuda_emu::address_of(%s, z)) "
           "{ return ::cuda_emu::address_of(%s, z); }, 0)")


def static_shared(m):
    """__shared__ T name[N]; -> T (&name)[N] = ::cuda_emu::block_shared<T[N]>(site);"""
    type_, name, dims = m.group(1).strip(), m.group(2), m.group(3)
    if dims:
        return "%s (&%s)%s = ::cuda_emu::block_shared<%s%s>(%s);" % (type_, name, dims, type_, dims, SITE)
    return "%s& %s = ::cuda_emu::block_shared<%s>(%s);" % (type_, name, type_, SITE)


def main():
    source, target = sys.argv[1], sys.argv[2]
    with open(source) as f:
        text = f.read()
    text = EXTERN_SHARED.sub(lambda m: "%s* const %s = ::cuda_emu::dynamic_shared<%s>();" % (m.group(1), m.group(2), m.group(1)), text)
    text = STATIC_SHARED.sub(static_shared, text)
    text = rewrite_launches(text)
    with open(target, "w") as f:
        f.write('#line 1 "%s"\n' % source)
        f.write(text)


if __name__ == "__main__":
    main()
