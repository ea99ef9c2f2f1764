"""The recommender's configuration objects (`Hint`, rasterization plans) and the GEMM tile
recommender (`recommend.py`)."""

from .hint import Hint  # noqa: F401
from .rasterization import (NoRasterization, Rasterization, Rasterization2DColumn,  # noqa: F401
                            Rasterization2DRow)
