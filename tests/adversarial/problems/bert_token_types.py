"""(redteam12 p02, smaller) BERT input embeddings, word + position + token type, then LayerNorm; the problem's own
token types are all 0 (single-segment batches), the type table has 2 rows."""
import torch
import torch.nn as nn

B = 2
L = 32
V = 512
H = 64
TYPES = 2


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.word = nn.Embedding(V, H)
        self.pos = nn.Embedding(64, H)
        self.token_type = nn.Embedding(TYPES, H)
        self.ln = nn.LayerNorm(H, eps=1e-12)

    def forward(self, input_ids, token_type_ids):
        n = input_ids.shape[1]
        pos = torch.arange(n, device=input_ids.device)
        e = self.word(input_ids) + self.pos(pos)[None] + self.token_type(token_type_ids)
        return self.ln(e)


def get_inputs():
    return [torch.randint(0, V, (B, L)), torch.zeros(B, L, dtype=torch.long)]


def get_init_inputs():
    return []
