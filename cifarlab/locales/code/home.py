# The PyTorch tutorial "Training a classifier", in outline.
import torch
import torchvision
import torchvision.transforms as transforms
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

# 1. Load and normalise CIFAR-10            -> Data
# 2. Define a convolutional neural network  -> Network
# 3. Define a loss function and optimizer   -> Loss & Optimizer
# 4. Train the network on the training data -> Train
# 5. Test the network on the test data      -> Results
# 6. Move the work to the GPU               -> CPU vs GPU
