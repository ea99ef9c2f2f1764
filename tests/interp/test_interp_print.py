"""T.print on the interpreter (SEMANTICS §14): formats, who prints (every thread for
expressions, thread 0 for shared/fragment buffers, every thread for local/global buffers),
default messages, and printing under conditions and inside T.Parallel."""

import torch

import tilelang.language as T
from interp_testutil import run


def _lines(capsys):
    return capsys.readouterr().out.splitlines()


def test_print_buffer_expr_and_message(capsys):
    @T.prim_func
    def k(A: T.Tensor((4,), "int32")):
        with T.Kernel(2, threads=4) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((2, 3), "float16")
            for i, j in T.Parallel(2, 3):
                S[i, j] = i * 3 + j + bx * 0.5
            T.print(S, msg="S")
            if tx < 2:
                T.print(tx + bx * 10, msg="t")
            T.print(bx > 0, msg="b")
            T.print(msg="hello")

    run(k, torch.zeros(4, dtype=torch.int32))
    out = _lines(capsys)
    assert len(out) == 2 * (6 + 2 + 4 + 4)
    assert out[0] == ("msg='S' BlockIdx=(0, 0, 0), ThreadIdx=(0, 0, 0): buffer=S, index=0, "
                      "dtype=half_t value=0.000000")
    assert out[5] == ("msg='S' BlockIdx=(0, 0, 0), ThreadIdx=(0, 0, 0): buffer=S, index=5, "
                      "dtype=half_t value=5.000000")
    assert out[6] == "msg='t' BlockIdx=(0, 0, 0), ThreadIdx=(0, 0, 0): dtype=int value=0"
    assert out[7] == "msg='t' BlockIdx=(0, 0, 0), ThreadIdx=(1, 0, 0): dtype=int value=1"
    assert out[8] == "msg='b' BlockIdx=(0, 0, 0), ThreadIdx=(0, 0, 0): dtype=bool value=false"
    assert out[12] == "msg='hello' BlockIdx=(0, 0, 0), ThreadIdx=(0, 0, 0)"
    assert out[15] == "msg='hello' BlockIdx=(0, 0, 0), ThreadIdx=(3, 0, 0)"
    second = out[16:]
    assert second[1].endswith("index=1, dtype=half_t value=1.500000")
    assert second[7] == "msg='t' BlockIdx=(1, 0, 0), ThreadIdx=(1, 0, 0): dtype=int value=11"
    assert second[8].endswith("dtype=bool value=true")


def test_print_defaults_and_global_buffer(capsys):
    @T.prim_func
    def k(A: T.Tensor((3,), "float32")):
        with T.Kernel(1, threads=(2, 2)):
            F = T.alloc_fragment((2,), "float32")
            for i in T.Parallel(2):
                F[i] = A[i] * 2.0
            T.print(F)
            T.print(A[2] * 2.0)
            T.print(A)

    run(k, torch.tensor([1.0, 2.0, 3.25]))
    out = _lines(capsys)
    assert out[0] == ("msg='buffer<F, float32>' BlockIdx=(0, 0, 0), ThreadIdx=(0, 0, 0): "
                      "buffer=F, index=0, dtype=float value=2.000000")
    assert out[1].endswith("index=1, dtype=float value=4.000000")
    expr_lines = out[2:6]
    assert all(line.startswith("msg='expr<") and line.endswith("dtype=float value=6.500000")
               for line in expr_lines)
    assert "ThreadIdx=(1, 1, 0)" in expr_lines[3]
    glob = out[6:]
    assert len(glob) == 4 * 3  # every thread prints the global buffer
    assert glob[0] == ("msg='' BlockIdx=(0, 0, 0), ThreadIdx=(0, 0, 0): buffer=A, index=0, "
                       "dtype=float value=1.000000")
    assert glob[-1].startswith("msg='' BlockIdx=(0, 0, 0), ThreadIdx=(1, 1, 0): buffer=A, "
                               "index=2")


def test_print_local_buffer_per_thread_and_in_parallel(capsys):
    @T.prim_func
    def k(A: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=2):
            tx = T.get_thread_binding()
            L = T.alloc_local((2,), "int32")
            L[0] = tx
            L[1] = tx * 7
            T.print(L, msg="L")
            for i in T.Parallel(4):
                if i % 2 == 1:
                    T.print(A[i], msg="p")

    run(k, torch.tensor([5, 6, 7, 8], dtype=torch.int32))
    out = _lines(capsys)
    assert out[:4] == [
        "msg='L' BlockIdx=(0, 0, 0), ThreadIdx=(0, 0, 0): buffer=L, index=0, dtype=int value=0",
        "msg='L' BlockIdx=(0, 0, 0), ThreadIdx=(0, 0, 0): buffer=L, index=1, dtype=int value=0",
        "msg='L' BlockIdx=(0, 0, 0), ThreadIdx=(1, 0, 0): buffer=L, index=0, dtype=int value=1",
        "msg='L' BlockIdx=(0, 0, 0), ThreadIdx=(1, 0, 0): buffer=L, index=1, dtype=int value=7",
    ]
    assert [line.split("value=")[1] for line in out[4:]] == ["6", "8"]
