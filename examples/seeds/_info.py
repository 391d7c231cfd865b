"""The ``get_tensor_info`` helper that seed 000's blog defines in an earlier post."""


def get_tensor_info(tensor):
    """One line with a tensor's autograd attributes, as seed 000 prints them."""
    info = []
    for name in ["requires_grad", "is_leaf", "retains_grad", "grad_fn", "grad"]:
        value = getattr(tensor, name) if name != "grad" else tensor._grad
        if name == "grad" and value is not None:
            value = value.item()
        info.append(f"{name}({value})")
    info.append(f"tensor({str(tensor)})")
    return " ".join(info)
