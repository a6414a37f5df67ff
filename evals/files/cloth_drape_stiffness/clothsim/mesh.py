import numpy as np


def grid_cloth(rows, cols, spacing):
    """Particles on a vertical grid hanging from its top row, with structural and shear springs."""
    pos = np.zeros((rows * cols, 3), dtype=np.float32)
    for r in range(rows):
        for c in range(cols):
            pos[r * cols + c] = (c * spacing, -r * spacing, 0.02 * np.sin(1.7 * c + 0.9 * r))
    springs = []
    for r in range(rows):
        for c in range(cols):
            i = r * cols + c
            if c + 1 < cols:
                springs.append((i, i + 1))
            if r + 1 < rows:
                springs.append((i, i + cols))
            if r + 1 < rows and c + 1 < cols:
                springs.append((i, i + cols + 1))
                springs.append((i + 1, i + cols))
    springs = np.array(springs, dtype=np.int32)
    rest = np.linalg.norm(pos[springs[:, 0]] - pos[springs[:, 1]], axis=1).astype(np.float32)
    inv_mass = np.ones(rows * cols, dtype=np.float32) * 10.0
    inv_mass[:cols] = 0.0
    return pos, springs, rest, inv_mass
